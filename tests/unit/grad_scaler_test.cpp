// Dynamic loss scaling (engine/training/grad_scaler.h): PyTorch's GradScaler rules, the unscale
// kernels on every device, and float16 training through the Trainer, whose overflows are
// worked out by hand below.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <limits>

#include "accelerator_test_util.h"
#include "engine/training/grad_scaler.h"
#include "engine/training/trainer.h"
#include "error_test_util.h"
#include "graph_test_util.h"
#include "op_test_util.h"

namespace dprun {
namespace {

using testing::error_of;
using testing::make_node;
using testing::one_weight_graph;

TEST(GradScaler, RefusesOptionsPyTorchRefuses) {
  EXPECT_EQ(error_of([] { GradScaler({.init_scale = 0}); }),
            "loss scaling: the initial scale 0 is not a positive float32");
  EXPECT_EQ(error_of([] { GradScaler({.init_scale = 1e39}); }),
            "loss scaling: the initial scale 1e+39 is not a positive float32");
  EXPECT_EQ(error_of([] { GradScaler({.growth_factor = 1}); }),
            "loss scaling: the growth factor 1 is not above 1");
  EXPECT_EQ(error_of([] { GradScaler({.backoff_factor = 1}); }),
            "loss scaling: the backoff factor 1 is not between 0 and 1");
  EXPECT_EQ(error_of([] { GradScaler({.growth_interval = 0}); }),
            "loss scaling: the growth interval 0 is not a positive number of steps");
}

// The scale as torch's _amp_update_scale_ moves it: halved after an overflow (the count of
// finite steps restarting), doubled after growth_interval finite steps in a row, and kept
// when doubling would make it infinite.
TEST(GradScaler, UpdatesTheScaleAsPyTorchDoes) {
  GradScaler scaler({.init_scale = 8, .growth_interval = 3});
  const Tensor finite = Tensor::from_vector<float>({1}, {1});
  const Tensor overflow = Tensor::from_vector<float>({1}, {INFINITY});
  auto next = [&](const Tensor& g) {
    Tensor copy = g.clone();
    scaler.unscale({copy});
    scaler.update();
    return scaler.scale();
  };
  EXPECT_EQ(next(finite), 8);
  EXPECT_EQ(next(finite), 8);
  EXPECT_EQ(scaler.growth_tracker(), 2);
  EXPECT_EQ(next(overflow), 4);
  EXPECT_EQ(scaler.growth_tracker(), 0);
  EXPECT_EQ(next(finite), 4);
  EXPECT_EQ(next(finite), 4);
  EXPECT_EQ(next(finite), 8);
  EXPECT_EQ(scaler.growth_tracker(), 0);

  GradScaler top({.init_scale = std::ldexp(1.0, 127), .growth_interval = 1});
  Tensor g = finite.clone();
  top.unscale({g});
  top.update();
  EXPECT_EQ(top.scale(), std::ldexp(1.0f, 127)) << "2^128 is not a float32";
}

TEST(GradScaler, ChecksEachStepOnceBeforeItsUpdate) {
  GradScaler scaler;
  Tensor g = Tensor::from_vector<float>({1}, {1});
  EXPECT_EQ(error_of([&] { scaler.update(); }),
            "loss scaling: update() needs the gradients of a step checked first (unscale() or "
            "step())");
  scaler.unscale({g});
  EXPECT_EQ(error_of([&] { scaler.unscale({g}); }),
            "loss scaling: the gradients were already unscaled this step; call update() first");
  EXPECT_EQ(error_of([&] {
              GradScaler other;
              other.unscale({Tensor::from_vector<int64_t>({1}, {1})});
            }),
            "loss scaling: gradient 0 is int64[1] on cpu:0; only float32 and float64 gradients "
            "are unscaled");
}

// The gradients unscaled on `device`: each value times the float32 reciprocal of the scale,
// and an infinity or NaN in any tensor reported.
void expect_unscales_on(Device device) {
  GradScaler scaler({.init_scale = 1024});
  Tensor a = Tensor::from_vector<float>({4}, {3, -0.5f, 1e-3f, 7e4f}).to(device, true);
  Tensor b = Tensor::from_vector<double>({2}, {-2048, 1.5}).to(device, true);
  EXPECT_TRUE(scaler.unscale({a, b}));
  EXPECT_EQ(testing::values_of<float>(a.to(Device::cpu())),
            (std::vector<float>{3.0f / 1024, -0.5f / 1024, 1e-3f / 1024, 7e4f / 1024}));
  EXPECT_EQ(testing::values_of<double>(b.to(Device::cpu())), (std::vector<double>{-2, 1.5 / 1024}));
  scaler.update();
  for (float bad : {INFINITY, -INFINITY, std::numeric_limits<float>::quiet_NaN()}) {
    SCOPED_TRACE(bad);
    Tensor fine = Tensor::from_vector<float>({2}, {2048, 4}).to(device, true);
    Tensor broken = Tensor::from_vector<float>({3}, {1, bad, 1}).to(device, true);
    EXPECT_FALSE(scaler.unscale({fine, broken}));
    // Every tensor is still multiplied, as PyTorch's kernel does; the step is skipped anyway.
    EXPECT_EQ(testing::values_of<float>(fine.to(Device::cpu())),
              (std::vector<float>{2, 4.0f / 1024}));
    scaler.update();
    EXPECT_EQ(scaler.scale(), 512);
    scaler = GradScaler({.init_scale = 1024});
  }
}

class GradScalerOnDevices : public testing::DeviceTest {};

TEST_P(GradScalerOnDevices, Unscales) {
  expect_unscales_on(device());
}

DPRUN_ON_EVERY_DEVICE(GradScalerOnDevices);

class GradScalerOnAccelerator : public testing::AcceleratorTest {};

// A skipped step changes neither the parameters nor the optimizer's state or step count: the
// next update is the optimizer's first.
TEST(GradScaler, SkipsTheOptimizerStepOnOverflow) {
  Tensor p = Tensor::from_vector<float>({2}, {1, 2});
  Sgd sgd({p}, {.lr = 0.5, .momentum = 0.9});
  GradScaler scaler({.init_scale = 4});
  EXPECT_FALSE(scaler.step(sgd, {Tensor::from_vector<float>({2}, {8, NAN})}));
  scaler.update();
  EXPECT_EQ(testing::values_of<float>(p), (std::vector<float>{1, 2}));
  EXPECT_EQ(sgd.steps(), 0);
  EXPECT_EQ(scaler.skipped_steps(), 1);
  EXPECT_EQ(scaler.scale(), 2);
  // Scale 2: the gradient {8, 4} is {4, 2}; the momentum buffer starts as it.
  EXPECT_TRUE(scaler.step(sgd, {Tensor::from_vector<float>({2}, {8, 4})}));
  scaler.update();
  EXPECT_EQ(testing::values_of<float>(p), (std::vector<float>{1 - 0.5f * 4, 2 - 0.5f * 2}));
  EXPECT_EQ(sgd.steps(), 1);
  EXPECT_EQ(scaler.skipped_steps(), 1);
}

// Float16 training through the Trainer, worked out by hand. Rows x = 1 and x = 0, targets 0:
// the loss is w^2 / 2 and its gradient w, however the rows are split. Scaled, the float16
// gradient of W is w times the scale, and overflows past float16's largest value (65504). SGD
// with lr 0.1 multiplies w by 0.9 at each step taken; the scale doubles after two finite steps
// in a row:
//
//   step     1      2      3      4      5      6      7      8
//   scale  65536  32768  16384  16384  32768  32768  65536  32768
//   w        2      2      2     1.8   1.62   1.458  1.31   1.31
//   w*scale 131072 65536  32768  29491  53084  47776  86000  43000
//           skip   skip                              skip
void expect_float16_training_on(const std::vector<Device>& devices) {
  TrainerOptions options;
  options.training.loss.kind = LossKind::Mse;
  options.training.precision = DType::Float16;
  options.parallel.device_ids = devices;
  options.loss_scaling.growth_interval = 2;
  auto model = std::make_shared<Model>(one_weight_graph(2.0f), devices[0]);
  Trainer trainer(model, options);
  Sgd sgd(trainer.parameters(), {.lr = 0.1});
  const GradScaler& scaler = *trainer.grad_scaler();
  const Tensor x = Tensor::from_vector<float>({2, 1}, {1, 0});
  const Tensor target = Tensor::from_vector<float>({2, 1}, {0, 0});
  const std::vector<float> scales = {65536, 32768, 16384, 16384, 32768, 32768, 65536, 32768};
  const std::vector<int64_t> skipped = {1, 2, 2, 2, 2, 2, 3, 3};
  double w = 2;
  for (size_t s = 0; s < scales.size(); ++s) {
    SCOPED_TRACE("step " + std::to_string(s + 1));
    EXPECT_EQ(scaler.scale(), scales[s]);
    const double loss = trainer.step({x}, target, sgd);
    EXPECT_NEAR(loss, w * w / 2, 2e-3 * w * w) << "the loss is reported unscaled";
    EXPECT_EQ(scaler.skipped_steps(), skipped[s]);
    if (skipped[s] == (s == 0 ? 0 : skipped[s - 1])) w *= 0.9;  // the step was taken
    EXPECT_NEAR(model->parameter("W").to(Device::cpu()).item_as_double(), w, 2e-3 * w);
  }
  EXPECT_EQ(sgd.steps(), 5);
  EXPECT_EQ(model->parameter("W").dtype(), DType::Float32);
}

TEST(Float16Training, SkipsOverflowingStepsAndMovesTheScaleOnTheCpu) {
  expect_float16_training_on({Device::cpu(0)});
  expect_float16_training_on({Device::cpu(0), Device::cpu(1)});
}

TEST_P(GradScalerOnAccelerator, Float16TrainingSkipsOverflowingSteps) {
  expect_float16_training_on(devices());
}

TEST(Float16Training, OnlyFloat16TrainingHasAScaler) {
  for (DType precision : {DType::Float32, DType::BFloat16}) {
    TrainerOptions options;
    options.training.loss.kind = LossKind::Mse;
    options.training.precision = precision;
    options.parallel.device_ids = {Device::cpu(0)};
    Trainer trainer(std::make_shared<Model>(one_weight_graph(1.0f), Device::cpu(0)), options);
    EXPECT_EQ(trainer.grad_scaler(), nullptr) << dtype_name(precision);
  }
}

DPRUN_ON_ACCELERATORS(GradScalerOnAccelerator);

}  // namespace
}  // namespace dprun
