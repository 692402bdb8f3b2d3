// Trains a classifier data-parallel on two CPU devices with the C++ API, the way a PyTorch
// training loop reads, checkpoints it and resumes it:
//
//   model = load(...); optimizer = SGD(model.parameters(), ...)
//   for x, y in batches: loss = loss_fn(DataParallel(model)(x), y); loss.backward();
//                        optimizer.step()
//                        every N steps: torch.save({model, optimizer, step}, OUT.ckpt)
//   evaluate(model, data); save(model, ...)
//
// The data are synthetic: rows of N(0, 1) features whose label is the index of the largest of
// the first C features (C = the model's class count), so the loss falls within a few steps.
//
// usage: dprun_train_mlp MODEL.onnx OUT.onnx [STEPS] [sgd|adam] [float32|bfloat16|float16]
//                        [--checkpoint-every N] [--resume]
//   MODEL.onnx takes float32[batch, F] and returns logits float32[batch, C] (models/mlp.onnx).
//   bfloat16 and float16 train in mixed precision (float32 parameters); float16 scales its
//   loss, so the loop hands the update to the trainer's GradScaler, as PyTorch's
//   scaler.step(optimizer); scaler.update().
//   --checkpoint-every N writes OUT.ckpt.onnx (loader/checkpoint_file.h) after every N steps
//   and after the last; --resume takes such a checkpoint as MODEL.onnx and continues the run
//   from its step to STEPS, with the same optimizer and precision: a run of 2x steps and a run
//   of x steps resumed for x more end with the same parameters, bit for bit.
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "engine/training/trainer.h"
#include "engine/training/validation.h"
#include "loader/checkpoint_file.h"
#include "loader/onnx_loader.h"

namespace {

constexpr int64_t kRows = 256, kBatch = 64;

// The declared size of dim `axis` of `type`, or throws.
int64_t declared_dim(const dprun::TensorType& type, size_t axis) {
  if (!type.shape || type.shape->size() <= axis || !(*type.shape)[axis].is_known())
    throw dprun::Error("the model's input and output must be [batch, size] with a known size");
  return (*type.shape)[axis].value;
}

struct Arguments {
  std::string model, out;
  int steps = 20;
  std::string kind = "sgd", precision = "float32";
  int checkpoint_every = 0;
  bool resume = false;
};

// The command line, or nullopt for a usage error.
std::optional<Arguments> parse_arguments(int argc, char** argv) {
  Arguments a;
  std::vector<std::string> positionals;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--resume") {
      a.resume = true;
    } else if (arg == "--checkpoint-every" && i + 1 < argc) {
      a.checkpoint_every = std::atoi(argv[++i]);
      if (a.checkpoint_every < 1) return std::nullopt;
    } else if (arg.rfind("--", 0) == 0) {
      return std::nullopt;
    } else {
      positionals.push_back(arg);
    }
  }
  if (positionals.size() < 2 || positionals.size() > 5) return std::nullopt;
  a.model = positionals[0];
  a.out = positionals[1];
  if (positionals.size() > 2) a.steps = std::atoi(positionals[2].c_str());
  if (positionals.size() > 3) a.kind = positionals[3];
  if (positionals.size() > 4) a.precision = positionals[4];
  if (a.steps < 1 || (a.kind != "sgd" && a.kind != "adam") ||
      (a.precision != "float32" && a.precision != "bfloat16" && a.precision != "float16"))
    return std::nullopt;
  return a;
}

// The data set: x [kRows, features] of N(0, 1), labels int64 [kRows].
dprun::TrainingData synthetic_data(const std::string& input, int64_t features, int64_t classes) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  std::vector<float> x(static_cast<size_t>(kRows * features));
  for (float& v : x) v = normal(rng);
  std::vector<int64_t> labels(static_cast<size_t>(kRows));
  for (int64_t r = 0; r < kRows; ++r) {
    const float* row = &x[static_cast<size_t>(r * features)];
    int64_t best = 0;
    for (int64_t c = 1; c < classes && c < features; ++c)
      if (row[c] > row[best]) best = c;
    labels[static_cast<size_t>(r)] = best;
  }
  // Batches of kBatch rows in row order (set .shuffle and .seed to reshuffle each epoch).
  return dprun::TrainingData({input}, {dprun::Tensor::from_vector<float>({kRows, features}, x)},
                             dprun::Tensor::from_vector<int64_t>({kRows}, labels),
                             {.batch = kBatch});
}

}  // namespace

int main(int argc, char** argv) {
  const std::optional<Arguments> args = parse_arguments(argc, argv);
  if (!args) {
    std::fprintf(stderr,
                 "usage: %s MODEL.onnx OUT.onnx [STEPS] [sgd|adam] [float32|bfloat16|float16] "
                 "[--checkpoint-every N] [--resume]\n"
                 "STEPS and N must be positive, the optimizer sgd or adam and the precision "
                 "float32, bfloat16 or float16\n",
                 argv[0]);
    return 2;
  }
  try {
    // The model's parameters live on device_ids[0]; the trainer replicates them to the others.
    // A checkpoint holds the model in its training form, with the run's state beside it.
    std::optional<dprun::Checkpoint> checkpoint;
    if (args->resume) checkpoint = dprun::read_checkpoint(args->model);
    auto model = std::make_shared<dprun::Model>(
        checkpoint ? dprun::Model(checkpoint->graph, dprun::Device::cpu(0))
                   : dprun::load_model(args->model, dprun::Device::cpu(0)));
    const int64_t features = declared_dim(model->input_types().at(0), 1);
    const int64_t classes = declared_dim(model->graph().outputs.at(0).type, 1);

    dprun::TrainerOptions options;
    options.training.loss.kind = dprun::LossKind::CrossEntropy;  // mean over the batch
    options.parallel.device_ids = {dprun::Device::cpu(0), dprun::Device::cpu(1)};
    options.training.precision = dprun::dtype_from_name(args->precision);
    dprun::Trainer trainer(model, options);

    std::unique_ptr<dprun::Optimizer> optimizer;
    if (args->kind == "sgd")
      optimizer = std::make_unique<dprun::Sgd>(trainer.parameters(),
                                               dprun::SgdOptions{.lr = 0.2, .momentum = 0.9});
    else
      optimizer =
          std::make_unique<dprun::Adam>(trainer.parameters(), dprun::AdamOptions{.lr = 1e-3});

    dprun::TrainingData data = synthetic_data(model->input_names().at(0), features, classes);

    // What a checkpoint saves and a resumed run must match: the optimizer's and the scaler's
    // state, and the settings that fix the arithmetic (a resume with another optimizer,
    // precision or batch is refused, naming it).
    const dprun::CheckpointedRun run{
        .model = *model,
        .parameter_names = trainer.parameter_names(),
        .optimizer = *optimizer,
        .scaler = trainer.grad_scaler(),
        .settings = dprun::run_settings(options, *model, trainer, *optimizer, kBatch, 1, false)};
    const std::string checkpoint_file = dprun::checkpoint_path(args->out);
    int first_step = 0;
    if (checkpoint) {
      first_step = static_cast<int>(dprun::restore_training_state(*checkpoint, args->model, run));
      std::printf("resuming %s at step %d\n", args->model.c_str(), first_step + 1);
    }

    std::printf("training %s on cpu:0,cpu:1 (%zu parameters), %s, batch %lld, %s\n",
                args->model.c_str(), trainer.parameter_names().size(), args->kind.c_str(),
                static_cast<long long>(kBatch), args->precision.c_str());
    for (int step = first_step; step < args->steps; ++step) {
      const dprun::Batch batch = data.batch(0, step % data.batches_per_epoch());
      // forward and backward on both devices, gradients summed on cpu:0 ...
      double loss = trainer.forward_backward(batch.inputs, batch.target);
      // ... then the update, in place on the model's parameters. trainer.step(batch.inputs,
      // batch.target, *optimizer) does both in one call.
      if (dprun::GradScaler* scaler = trainer.grad_scaler()) {
        // float16: the gradients are of the loss times the scale; the scaler divides them, skips
        // the update if one overflowed, and adjusts the scale.
        const bool stepped = scaler->step(*optimizer, trainer.gradients());
        scaler->update();
        if (!stepped) std::printf("step %d skipped: a gradient overflowed\n", step + 1);
      } else {
        optimizer->step(trainer.gradients());
      }
      std::printf("step %d loss %.6f\n", step + 1, loss);
      if (args->checkpoint_every &&
          ((step + 1) % args->checkpoint_every == 0 || step + 1 == args->steps)) {
        dprun::save_checkpoint(checkpoint_file, run, step + 1);
        std::printf("checkpoint %s at step %d\n", checkpoint_file.c_str(), step + 1);
      }
    }
    // The model in inference mode over the training rows (a held-out set in real use).
    const dprun::ValidationResult eval =
        dprun::Validation(*model, options.training.loss, data).run();
    std::printf("evaluation loss %.6f, accuracy %.4f\n", eval.loss, eval.accuracy.value_or(0));
    dprun::save_model(*model, args->out);
    std::printf("saved %s\n", args->out.c_str());
    return 0;
  } catch (const dprun::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
