// Trains a classifier data-parallel on two CPU devices with the C++ API, the way a PyTorch
// training loop reads:
//
//   model = load(...); optimizer = SGD(model.parameters(), ...)
//   for x, y in batches: loss = loss_fn(DataParallel(model)(x), y); loss.backward();
//                        optimizer.step()
//   save(model, ...)
//
// The data are synthetic: rows of N(0, 1) features whose label is the index of the largest of
// the first C features (C = the model's class count), so the loss falls within a few steps.
//
// usage: dprun_train_mlp MODEL.onnx OUT.onnx [STEPS] [sgd|adam] [float32|bfloat16|float16]
//   MODEL.onnx takes float32[batch, F] and returns logits float32[batch, C] (models/mlp.onnx).
//   bfloat16 and float16 train in mixed precision (float32 parameters); float16 scales its
//   loss, so the loop hands the update to the trainer's GradScaler, as PyTorch's
//   scaler.step(optimizer); scaler.update().
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "engine/autograd/trainer.h"
#include "loader/onnx_loader.h"

namespace {

constexpr int64_t kRows = 256, kBatch = 64;

// The declared size of dim `axis` of `type`, or throws.
int64_t declared_dim(const dprun::TensorType& type, size_t axis) {
  if (!type.shape || type.shape->size() <= axis || !(*type.shape)[axis].is_known())
    throw dprun::Error("the model's input and output must be [batch, size] with a known size");
  return (*type.shape)[axis].value;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3 || argc > 6) {
    std::fprintf(stderr,
                 "usage: %s MODEL.onnx OUT.onnx [STEPS] [sgd|adam] [float32|bfloat16|float16]\n",
                 argv[0]);
    return 2;
  }
  const int steps = argc > 3 ? std::atoi(argv[3]) : 20;
  const std::string kind = argc > 4 ? argv[4] : "sgd";
  const std::string precision = argc > 5 ? argv[5] : "float32";
  if (steps < 1 || (kind != "sgd" && kind != "adam") ||
      (precision != "float32" && precision != "bfloat16" && precision != "float16")) {
    std::fprintf(stderr,
                 "STEPS must be positive, the optimizer sgd or adam and the precision float32, "
                 "bfloat16 or float16\n");
    return 2;
  }
  try {
    // The model's parameters live on device_ids[0]; the trainer replicates them to the others.
    auto model = std::make_shared<dprun::Model>(dprun::load_model(argv[1], dprun::Device::cpu(0)));
    const int64_t features = declared_dim(model->input_types().at(0), 1);
    const int64_t classes = declared_dim(model->graph().outputs.at(0).type, 1);

    dprun::TrainerOptions options;
    options.training.loss.kind = dprun::LossKind::CrossEntropy;  // mean over the batch
    options.parallel.device_ids = {dprun::Device::cpu(0), dprun::Device::cpu(1)};
    options.training.precision = dprun::dtype_from_name(precision);
    dprun::Trainer trainer(model, options);

    std::unique_ptr<dprun::Optimizer> optimizer;
    if (kind == "sgd")
      optimizer = std::make_unique<dprun::Sgd>(trainer.parameters(),
                                               dprun::SgdOptions{.lr = 0.2, .momentum = 0.9});
    else
      optimizer =
          std::make_unique<dprun::Adam>(trainer.parameters(), dprun::AdamOptions{.lr = 1e-3});

    // The data set: x [kRows, features], labels int64 [kRows].
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
    dprun::Tensor all_x = dprun::Tensor::from_vector<float>({kRows, features}, x);
    dprun::Tensor all_labels = dprun::Tensor::from_vector<int64_t>({kRows}, labels);

    std::printf("training %s on cpu:0,cpu:1 (%zu parameters), %s, batch %lld, %s\n", argv[1],
                trainer.parameter_names().size(), kind.c_str(), static_cast<long long>(kBatch),
                precision.c_str());
    for (int step = 0; step < steps; ++step) {
      const int64_t start = (step * kBatch) % kRows;
      dprun::Tensor batch = all_x.narrow(0, start, kBatch);
      dprun::Tensor target = all_labels.narrow(0, start, kBatch);
      // forward and backward on both devices, gradients summed on cpu:0 ...
      double loss = trainer.forward_backward({batch}, target);
      // ... then the update, in place on the model's parameters. trainer.step({batch}, target,
      // *optimizer) does both in one call.
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
    }
    dprun::save_model(*model, argv[2]);
    std::printf("saved %s\n", argv[2]);
    return 0;
  } catch (const dprun::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
