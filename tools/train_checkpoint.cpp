#include "tools/train_checkpoint.h"

#include <filesystem>

#include "engine/parallel/distributed.h"
#include "loader/onnx_loader.h"

namespace dprun::cli {

namespace {

constexpr char kStep[] = "step";
constexpr char kOptimizerSteps[] = "optimizer.steps";
constexpr char kOptimizerPrefix[] = "optimizer.";
constexpr char kLossScale[] = "loss_scale";
constexpr char kGrowthTracker[] = "loss_scale.growth_tracker";
constexpr char kSkippedSteps[] = "loss_scale.skipped_steps";
constexpr char kChecksum[] = "model.checksum";

Tensor int64_scalar(int64_t v) {
  return Tensor::scalar<int64_t>(v);
}

}  // namespace

std::string training_state_path(const std::string& model_path) {
  return model_path + ".state";
}

void save_training_state(const std::string& path, const Model& model, const Optimizer& optimizer,
                         const GradScaler* scaler, int64_t step) {
  Graph state;
  state.name = "dprun_training_state";
  state.ir_version = 8;
  state.opset_imports[""] = 17;
  state.initializers[kStep] = int64_scalar(step);
  state.initializers[kChecksum] = int64_scalar(static_cast<int64_t>(checksum_parameters(model)));
  const Optimizer::State o = optimizer.state();
  state.initializers[kOptimizerSteps] = int64_scalar(o.steps);
  for (const auto& [name, buffer] : o.buffers)
    state.initializers[kOptimizerPrefix + name] = buffer.to(Device::cpu());
  if (scaler) {
    state.initializers[kLossScale] = Tensor::scalar<float>(scaler->scale());
    state.initializers[kGrowthTracker] = int64_scalar(scaler->growth_tracker());
    state.initializers[kSkippedSteps] = int64_scalar(scaler->skipped_steps());
  }
  save_graph(state, {}, path);
}

int64_t load_training_state(const std::string& path, const Model& model, Optimizer& optimizer,
                            GradScaler* scaler) {
  DPRUN_CHECK(std::filesystem::exists(path), path,
              ": does not exist (--checkpoint-every writes it beside each checkpoint)");
  // load_graph's errors name the file themselves.
  const std::shared_ptr<Graph> state =
      load_graph(path, {.run_checker = false, .run_shape_inference = false});
  try {
    auto int64_of = [&](const char* name) {
      auto it = state->initializers.find(name);
      DPRUN_CHECK(it != state->initializers.end() && it->second.dtype() == DType::Int64 &&
                      it->second.numel() == 1,
                  "has no int64 '", name, "': not a dprun training state");
      return it->second.data<int64_t>()[0];
    };
    const int64_t step = int64_of(kStep);
    DPRUN_CHECK(int64_of(kChecksum) == static_cast<int64_t>(checksum_parameters(model)),
                "was saved with other parameters than the model's: the checkpoint model and its "
                "state are not of one step");
    Optimizer::State o{.steps = int64_of(kOptimizerSteps)};
    const std::string prefix = kOptimizerPrefix;
    for (const auto& [name, tensor] : state->initializers)
      if (name != kOptimizerSteps && name.rfind(prefix, 0) == 0)
        o.buffers[name.substr(prefix.size())] = tensor;
    optimizer.load_state(o);
    const bool scaled = state->initializers.count(kLossScale) > 0;
    DPRUN_CHECK(scaled == (scaler != nullptr),
                scaled ? "is of float16 training, with a loss scale; train with --precision "
                         "float16 to resume it"
                       : "has no loss scale: it is not of float16 training");
    if (scaler)
      scaler->restore(state->initializers.at(kLossScale).data<float>()[0], int64_of(kGrowthTracker),
                      int64_of(kSkippedSteps));
    return step;
  } catch (const Error& e) {
    fail(path, ": ", e.what());
  }
}

}  // namespace dprun::cli
