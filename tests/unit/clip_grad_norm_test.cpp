// Gradient clipping (engine/training/clip_grad_norm.h) against values worked out by hand, on the
// CPU and on every accelerator, and through the Trainer; models/training/mlp_clip_dp3 checks it
// against PyTorch's clip_grad_norm_ (tests/cli/train_references_test.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "accelerator_test_util.h"
#include "engine/parallel/device_list.h"
#include "engine/training/clip_grad_norm.h"
#include "engine/training/trainer.h"
#include "error_test_util.h"
#include "graph_test_util.h"

namespace dprun {
namespace {

using testing::error_of;
using testing::one_weight_graph;

std::vector<float> host_values(const Tensor& t) {
  return testing::values_of<float>(t.to(Device::cpu()));
}

// Gradients {3, 4} and {0, -12}: norms 5 and 12, total 13; the largest absolute value 12.
void expect_clips_on(Device device) {
  auto gradients = [&] {
    return std::vector<Tensor>{Tensor::from_vector<float>({2}, {3, 4}).to(device, true),
                               Tensor::from_vector<float>({2}, {0, -12}).to(device, true)};
  };
  // Below the norm: every gradient times (1 / (13 + 1e-6)) * 6.5, in float32 as PyTorch.
  std::vector<Tensor> g = gradients();
  EXPECT_EQ(clip_grad_norm(g, 6.5), 13.0);
  const float coefficient = (1.0f / (13.0f + 1e-6f)) * 6.5f;
  EXPECT_EQ(host_values(g[0]), (std::vector<float>{3 * coefficient, 4 * coefficient}));
  EXPECT_EQ(host_values(g[1]), (std::vector<float>{0 * coefficient, -12 * coefficient}));
  // Above it: nothing changes.
  g = gradients();
  EXPECT_EQ(clip_grad_norm(g, 20), 13.0);
  EXPECT_EQ(host_values(g[0]), (std::vector<float>{3, 4}));
  EXPECT_EQ(host_values(g[1]), (std::vector<float>{0, -12}));
  // The infinity norm.
  g = gradients();
  EXPECT_EQ(clip_grad_norm(g, 6, kInfinityNorm), 12.0);
  const float half = (1.0f / (12.0f + 1e-6f)) * 6.0f;
  EXPECT_EQ(host_values(g[0]), (std::vector<float>{3 * half, 4 * half}));
  // A NaN makes the norm and, as in PyTorch, every gradient NaN.
  g = {Tensor::from_vector<float>({2}, {1, NAN}).to(device, true)};
  EXPECT_TRUE(std::isnan(clip_grad_norm(g, 1)));
  EXPECT_TRUE(std::isnan(host_values(g[0])[0]));
}

class ClipGradNormOnDevices : public testing::DeviceTest {};

TEST_P(ClipGradNormOnDevices, ScalesEveryGradientByPyTorchsCoefficient) {
  expect_clips_on(device());
}

TEST(ClipGradNorm, ANormOfManyElementsIsTheRootOfTheirSquares) {
  // 100000 elements of 0.5 (several blocks of the GPU's first pass): norm 0.5 * sqrt(1e5).
  std::vector<float> halves(100000, 0.5f);
  for (Device d : {Device::cpu(0), Device::sim(0)}) {
    std::vector<Tensor> g = {Tensor::from_vector<float>({100000}, halves).to(d, true)};
    EXPECT_EQ(clip_grad_norm(g, 1e9), static_cast<double>(static_cast<float>(0.5 * std::sqrt(1e5))))
        << d.to_string();
  }
}

TEST(ClipGradNorm, RefusesWhatPyTorchWouldNotClip) {
  std::vector<Tensor> g = {Tensor::from_vector<float>({1}, {1})};
  EXPECT_EQ(error_of([&] { clip_grad_norm(g, 0); }),
            "gradient clipping: max_norm 0 is not a positive number");
  EXPECT_EQ(error_of([&] { clip_grad_norm(g, 1, 1.0); }),
            "gradient clipping: norm_type 1 is not 2 or infinity");
  std::vector<Tensor> mixed = {g[0], Tensor::from_vector<double>({1}, {1})};
  EXPECT_EQ(error_of([&] { clip_grad_norm(mixed, 1); }),
            "gradient clipping: gradient 1 is float64[1] on cpu:0; the gradients must be all "
            "float32 or all float64");
  EXPECT_EQ(clip_grad_norm({}, 1), 0.0);
}

// The Trainer clips after the backward pass: with one weight w = 2, x = 1, target 0 and the
// mean squared error the gradient is 2 w = 4; clipped to 1 it is 1 / (4 + 1e-6) * 4, so SGD with
// lr 0.5 moves w by about 0.5, not 2.
TEST(ClipGradNorm, TheTrainerClipsBeforeTheUpdate) {
  for (const char* devices : {"cpu:0", "cpu:0,cpu:1", "sim:0"}) {
    SCOPED_TRACE(devices);
    TrainerOptions options;
    options.training.loss.kind = LossKind::Mse;
    options.parallel.device_ids = parse_device_list(devices);
    options.max_grad_norm = 1;
    auto model = std::make_shared<Model>(one_weight_graph(2), options.parallel.device_ids[0]);
    Trainer trainer(model, options);
    Sgd sgd(trainer.parameters(), {.lr = 0.5});
    trainer.step({Tensor::from_vector<float>({1, 1}, {1})}, Tensor::from_vector<float>({1, 1}, {0}),
                 sgd);
    EXPECT_EQ(trainer.last_grad_norm(), 4.0);
    const float clipped = 4.0f * ((1.0f / (4.0f + 1e-6f)) * 1.0f);
    EXPECT_EQ(model->parameter("W").to(Device::cpu()).data<float>()[0], 2.0f - 0.5f * clipped);
  }
  TrainerOptions bad;
  bad.training.loss.kind = LossKind::Mse;
  bad.parallel.device_ids = {Device::cpu(0)};
  bad.max_grad_norm = -1;
  EXPECT_EQ(
      error_of([&] { Trainer(std::make_shared<Model>(one_weight_graph(2), Device::cpu(0)), bad); }),
      "Trainer: max_grad_norm -1 is not a positive number or 0");
}

DPRUN_ON_EVERY_DEVICE(ClipGradNormOnDevices);

}  // namespace
}  // namespace dprun
