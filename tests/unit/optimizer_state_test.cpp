// Optimizer::state and load_state (PyTorch's state_dict/load_state_dict): the buffers by name,
// an optimizer continued from another's state updating as that one does, and states that do not
// fit refused with nothing changed.
#include <gtest/gtest.h>

#include "accelerator_test_util.h"
#include "engine/training/optimizer.h"
#include "error_test_util.h"
#include "graph_test_util.h"

namespace dprun {
namespace {

using testing::error_of;
using testing::values_of;

TEST(OptimizerState, NamesEachBufferByParameter) {
  Tensor a = Tensor::from_vector<float>({2}, {1, 2}), b = Tensor::from_vector<float>({1}, {3});
  Sgd sgd({a, b}, {.lr = 0.1, .momentum = 0.9});
  Adam adam({a, b}, {});
  Sgd plain({a, b}, {.lr = 0.1});
  auto names = [](const Optimizer::State& s) {
    std::vector<std::string> out;
    for (const auto& [name, t] : s.buffers) out.push_back(name);
    return out;
  };
  EXPECT_EQ(names(sgd.state()),
            (std::vector<std::string>{"momentum_buffer.0", "momentum_buffer.1"}));
  EXPECT_EQ(names(adam.state()),
            (std::vector<std::string>{"exp_avg.0", "exp_avg.1", "exp_avg_sq.0", "exp_avg_sq.1"}));
  EXPECT_EQ(names(plain.state()), std::vector<std::string>{});
}

// Two Adam steps, or one step, a state handed to a fresh optimizer over copies of the
// parameters on `device` (the state read back to the host, as a checkpoint holds it), and its
// step: the same bits.
void expect_continues_on(Device device) {
  const Tensor g1 = Tensor::from_vector<float>({3}, {0.5f, -1, 2});
  const Tensor g2 = Tensor::from_vector<float>({3}, {-0.25f, 3, 1});
  Tensor p = Tensor::from_vector<float>({3}, {1, 2, 3}).to(device, true);
  Adam original({p}, {.lr = 0.1});
  original.step({g1});
  Optimizer::State saved = original.state();
  for (auto& [name, buffer] : saved.buffers) buffer = buffer.to(Device::cpu());
  Tensor q = p.to(device, true);
  Adam continued({q}, {.lr = 0.1});
  continued.load_state(saved);
  EXPECT_EQ(continued.steps(), 1);
  original.step({g2});
  continued.step({g2});
  EXPECT_EQ(values_of<float>(q.to(Device::cpu())), values_of<float>(p.to(Device::cpu())));
}

class OptimizerStateOnDevices : public testing::DeviceTest {};

TEST_P(OptimizerStateOnDevices, AContinuedOptimizerUpdatesAsTheOriginal) {
  expect_continues_on(device());
}

DPRUN_ON_EVERY_DEVICE(OptimizerStateOnDevices);

TEST(OptimizerState, RefusesAStateThatDoesNotFit) {
  Tensor p = Tensor::from_vector<float>({2}, {1, 2});
  Sgd sgd({p}, {.lr = 0.1, .momentum = 0.9});
  Optimizer::State s = sgd.state();
  s.buffers["momentum_buffer.0"] = Tensor::from_vector<float>({3}, {1, 2, 3});
  EXPECT_EQ(error_of([&] { sgd.load_state(s); }),
            "optimizer: 'momentum_buffer.0' is float32[3] on cpu:0 in the state but float32[2] on "
            "cpu:0 here");
  s.buffers.clear();
  EXPECT_EQ(error_of([&] { sgd.load_state(s); }), "optimizer: the state lacks 'momentum_buffer.0'");
  s.buffers["exp_avg.0"] = p;
  EXPECT_EQ(error_of([&] { sgd.load_state(s); }),
            "optimizer: the state has 'exp_avg.0', which this optimizer does not keep");
  EXPECT_EQ(sgd.steps(), 0);
}

}  // namespace
}  // namespace dprun
