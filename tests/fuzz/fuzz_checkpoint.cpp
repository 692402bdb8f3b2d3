// Fuzz target: bytes as a `dprun train` checkpoint (OUT.ckpt.onnx), resumed into the run that
// models/training/loss_none.onnx makes with `--loss none --optimizer sgd --lr 0.2 --momentum
// 0.5 --batch 8` (the corpus's checkpoints come from that run): read the file, make the model
// of its graph and an optimizer, restore the state. Each step either succeeds or throws
// dprun::Error; anything else (a crash, a sanitizer report, another exception) is a defect.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <memory>
#include <string>

#include "engine/error.h"
#include "engine/training/trainer.h"
#include "loader/checkpoint_file.h"
#include "loader/onnx_loader.h"

namespace {

using namespace dprun;

// What the CLI compares a checkpoint's settings with: those of the run above.
const std::vector<RunSetting>& expected_settings() {
  static const std::vector<RunSetting> settings = [] {
    auto model = std::make_shared<Model>(
        load_model(std::string(DPRUN_SOURCE_DIR) + "/models/training/loss_none.onnx"));
    TrainerOptions options;
    options.training.loss.kind = LossKind::None;
    Trainer trainer(model, options);
    Sgd sgd(trainer.parameters(), {.lr = 0.2, .momentum = 0.5});
    return run_settings(options, *model, trainer, sgd, 8, 1, false);
  }();
  return settings;
}

void resume(const std::string& path) {
  const Checkpoint checkpoint = read_checkpoint(path);
  Model model(checkpoint.graph, Device::cpu());
  Sgd sgd(model.parameters(), {.lr = 0.2, .momentum = 0.5});
  const std::vector<std::string> names = model.parameter_names();
  const CheckpointedRun run{
      .model = model, .parameter_names = names, .optimizer = sgd, .settings = expected_settings()};
  restore_training_state(checkpoint, path, run);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The reader takes a path, as --resume does: the bytes go to a file of this process's own.
  static const std::string path =
      "/tmp/dprun_fuzz_checkpoint_" + std::to_string(getpid()) + ".onnx";
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  try {
    resume(path);
  } catch (const Error&) {
  }
  return 0;
}
