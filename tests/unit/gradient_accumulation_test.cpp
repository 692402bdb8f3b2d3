// Gradient accumulation (engine/training/gradient_accumulation.h and Trainer::forward_backward's
// accumulate): sums where the sums live, on the CPU and every accelerator, and two batches
// accumulated into one update as one batch of their rows.
#include <gtest/gtest.h>

#include "accelerator_test_util.h"
#include "engine/training/gradient_accumulation.h"
#include "engine/training/trainer.h"
#include "error_test_util.h"
#include "graph_test_util.h"

namespace dprun {
namespace {

using testing::error_of;

// sums on `device`, addends on the host: the addends are copied over and added in place.
void expect_adds_on(Device device) {
  std::vector<Tensor> sums = {Tensor::from_vector<float>({3}, {1, 2, 3}).to(device, true),
                              Tensor::from_vector<double>({1}, {0.5}).to(device, true)};
  add_gradients(sums, {Tensor::from_vector<float>({3}, {0.5f, -2, 1e-3f}),
                       Tensor::from_vector<double>({1}, {0.25})});
  EXPECT_EQ(testing::values_of<float>(sums[0].to(Device::cpu())),
            (std::vector<float>{1.5f, 0, 3 + 1e-3f}));
  EXPECT_EQ(testing::values_of<double>(sums[1].to(Device::cpu())), std::vector<double>{0.75});
  EXPECT_EQ(sums[0].device(), device);
}

class GradientAccumulationOnDevices : public testing::DeviceTest {};

TEST_P(GradientAccumulationOnDevices, AddsWhereTheSumsLive) {
  expect_adds_on(device());
}

DPRUN_ON_EVERY_DEVICE(GradientAccumulationOnDevices);

class GradientAccumulationOnAccelerator : public testing::AcceleratorTest {};

TEST(GradientAccumulation, RefusesGradientsThatDoNotPair) {
  std::vector<Tensor> sums = {Tensor::from_vector<float>({2}, {1, 2})};
  EXPECT_EQ(error_of([&] { add_gradients(sums, {}); }),
            "gradient accumulation: 0 gradients to add to 1");
  EXPECT_EQ(error_of([&] {
              add_gradients(sums, {Tensor::from_vector<float>({3}, {1, 2, 3})});
            }),
            "gradient accumulation: gradient 0 is float32[3] on cpu:0 but the sum so far is "
            "float32[2] on cpu:0");
}

// y = x W (one weight), mean squared error against 0: two batches of one row, each weighted 1/2
// and accumulated, give the gradient of the batch of both rows, on every kind of device list.
void expect_accumulation_is_one_batch(const std::vector<Device>& devices) {
  auto gradient_of = [&](bool accumulate) {
    TrainerOptions options;
    options.training.loss.kind = LossKind::Mse;
    options.parallel.device_ids = devices;
    Trainer trainer(std::make_shared<Model>(testing::one_weight_graph(2), devices[0]), options);
    const Tensor zero = Tensor::from_vector<float>({1, 1}, {0});
    if (!accumulate) {
      trainer.forward_backward({Tensor::from_vector<float>({2, 1}, {1, 3})},
                               Tensor::from_vector<float>({2, 1}, {0, 0}));
    } else {
      trainer.forward_backward({Tensor::from_vector<float>({1, 1}, {1})}, zero, 0.5);
      trainer.forward_backward({Tensor::from_vector<float>({1, 1}, {3})}, zero, 0.5, true);
    }
    return trainer.gradients().at(0).to(Device::cpu()).item_as_double();
  };
  // d/dw mean((x w)^2) = 2 w mean(x^2) = 2 * 2 * (1 + 9) / 2 = 20.
  EXPECT_EQ(gradient_of(false), 20.0);
  EXPECT_EQ(gradient_of(true), 20.0);
}

TEST(GradientAccumulation, TwoHalfBatchesAreOneBatch) {
  expect_accumulation_is_one_batch({Device::cpu(0)});
  expect_accumulation_is_one_batch({Device::cpu(0), Device::cpu(1)});
  TrainerOptions options;
  options.training.loss.kind = LossKind::Mse;
  options.parallel.device_ids = {Device::cpu(0)};
  Trainer fresh(std::make_shared<Model>(testing::one_weight_graph(2), Device::cpu(0)), options);
  EXPECT_EQ(error_of([&] {
              fresh.forward_backward({Tensor::from_vector<float>({1, 1}, {1})},
                                     Tensor::from_vector<float>({1, 1}, {0}), 1, true);
            }),
            "Trainer: nothing to accumulate into: no forward_backward ran yet");
}

// On one device the second batch's gradients come straight from its run, whose stream the
// sum's must wait for (on several, the reduce onto device 0 hands them on).
TEST_P(GradientAccumulationOnAccelerator, TwoHalfBatchesAreOneBatch) {
  expect_accumulation_is_one_batch(devices());
  expect_accumulation_is_one_batch({devices()[0]});
}

DPRUN_ON_ACCELERATORS(GradientAccumulationOnAccelerator);

}  // namespace
}  // namespace dprun
