// DataParallel and training on accelerators against the same work on cpu:0: summed outputs
// reduced with the backend's collectives (NCCL on GPUs), and Trainer steps on one device and
// on several (gradients reduced onto the first, the update there, parameters broadcast back),
// within 1e-5 relative. Runs on the simulated devices everywhere and on CUDA GPUs where present.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "accelerator_test_util.h"
#include "engine/parallel/data_parallel.h"
#include "engine/training/trainer.h"
#include "graph_test_util.h"
#include "op_test_util.h"

namespace dprun {
namespace {

using testing::random_floats;

std::shared_ptr<Graph> mlp_graph() {
  return testing::small_mlp_graph(true);
}

void expect_close(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  Tensor g = got.to(Device::cpu()), w = want.to(Device::cpu());
  for (int64_t i = 0; i < w.numel(); ++i) {
    double a = g.data<float>()[i], b = w.data<float>()[i];
    ASSERT_NEAR(a, b, 1e-5 * std::abs(b) + 1e-7) << what << ", element " << i;
  }
}

using AcceleratorDataParallel = testing::AcceleratorTest;
using AcceleratorTrainer = testing::AcceleratorTest;

TEST_P(AcceleratorDataParallel, SummedOutputsOnEveryDeviceMatchTheCpu) {
  Tensor x = random_floats({37, 4}, 5);
  auto cpu_model = std::make_shared<Model>(mlp_graph(), Device::cpu(0));
  std::vector<Tensor> want = cpu_model->run({x});
  std::vector<Device> ids = devices();
  auto model = std::make_shared<Model>(mlp_graph(), ids[0]);
  DataParallelOptions options;
  options.device_ids = ids;
  options.summed_outputs = {"total"};
  DataParallel parallel(model, options);
  for (int call = 0; call < 2; ++call) {  // the second call reuses the replicas
    std::vector<Tensor> got = parallel.forward({x});
    ASSERT_EQ(got.size(), 2u);
    EXPECT_EQ(got[0].device(), ids[0]);
    EXPECT_EQ(got[1].device(), ids[0]);
    expect_close(got[0], want[0], "y");
    expect_close(got[1], want[1], "total");
  }
}

struct Run {
  std::vector<double> losses;
  std::vector<Tensor> parameters;  // on the host
};

// Three steps of SGD with momentum, then three of AdamW, on `devices`.
Run train(const std::vector<Device>& devices) {
  Tensor x = random_floats({24, 4}, 6), t = random_floats({24, 3}, 7);
  auto model = std::make_shared<Model>(mlp_graph(), devices[0]);
  TrainerOptions options;
  options.training.loss.kind = LossKind::Mse;
  options.parallel.device_ids = devices;
  Trainer trainer(model, options);
  Run run;
  Sgd sgd(trainer.parameters(), {.lr = 0.05, .momentum = 0.9, .weight_decay = 0.01});
  for (int s = 0; s < 3; ++s) run.losses.push_back(trainer.step({x}, t, sgd));
  Adam adamw(trainer.parameters(),
             {.lr = 0.01, .weight_decay = 0.01, .decoupled_weight_decay = true});
  for (int s = 0; s < 3; ++s) run.losses.push_back(trainer.step({x}, t, adamw));
  for (const Tensor& p : trainer.parameters()) {
    EXPECT_EQ(p.device(), devices[0]);
    run.parameters.push_back(p.to(Device::cpu()));
  }
  return run;
}

void expect_same_training(const Run& got, const Run& want) {
  ASSERT_EQ(got.losses.size(), want.losses.size());
  for (size_t s = 0; s < want.losses.size(); ++s)
    EXPECT_NEAR(got.losses[s], want.losses[s], 1e-5 * std::abs(want.losses[s])) << "step " << s;
  ASSERT_EQ(got.parameters.size(), want.parameters.size());
  for (size_t k = 0; k < want.parameters.size(); ++k)
    expect_close(got.parameters[k], want.parameters[k], "parameter " + std::to_string(k));
}

TEST_P(AcceleratorTrainer, StepsOnOneDeviceMatchTheCpu) {
  expect_same_training(train({device()}), train({Device::cpu(0)}));
}

TEST_P(AcceleratorTrainer, StepsOnEveryDeviceMatchTheCpu) {
  expect_same_training(train(devices()), train({Device::cpu(0)}));
}

TEST_P(AcceleratorTrainer, StepsOnADeviceBesideACpuDeviceMatchTheCpu) {
  // A mixed list: gradients summed on the host and copied to the device, the update there.
  expect_same_training(train({device(), Device::cpu(1)}), train({Device::cpu(0)}));
}

DPRUN_ON_ACCELERATORS(AcceleratorDataParallel);
DPRUN_ON_ACCELERATORS(AcceleratorTrainer);

}  // namespace
}  // namespace dprun
