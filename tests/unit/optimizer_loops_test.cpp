// The optimizers' vectorised float32 loops against the scalar formulas of torch.optim, element
// by element and bitwise, for every combination of settings; and the same update with its
// elements split over several devices' workers.
#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <random>

#include "accelerator_test_util.h"
#include "engine/parallel/device_list.h"
#include "engine/training/optimizer.h"
#include "error_test_util.h"
#include "graph_test_util.h"

namespace dprun {
namespace {

std::vector<float> random_values(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1, 1);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// 1003 elements: whole vectors and a remainder.
constexpr size_t kN = 1003;

TEST(OptimizerLoops, SgdMatchesTheScalarFormulaInEverySetting) {
  for (double momentum : {0.0, 0.9})
    for (double weight_decay : {0.0, 0.01})
      for (bool nesterov : {false, true}) {
        if (nesterov && momentum == 0) continue;
        SCOPED_TRACE(::testing::Message() << "momentum " << momentum << " wd " << weight_decay
                                          << " nesterov " << nesterov);
        SgdOptions o{
            .lr = 0.1, .momentum = momentum, .weight_decay = weight_decay, .nesterov = nesterov};
        std::vector<float> p = random_values(kN, 1), buf(kN);
        Tensor param = Tensor::from_vector<float>({static_cast<int64_t>(kN)}, p);
        Sgd sgd({param}, o);
        const float wd = static_cast<float>(weight_decay), m = static_cast<float>(momentum);
        const float keep = 1.0f, neg_lr = static_cast<float>(-0.1);
        for (int step = 1; step <= 3; ++step) {
          std::vector<float> g = random_values(kN, 10 + static_cast<uint32_t>(step));
          sgd.step({Tensor::from_vector<float>({static_cast<int64_t>(kN)}, g)});
          for (size_t i = 0; i < kN; ++i) {
            float d = g[i];
            if (weight_decay != 0) d = d + wd * p[i];
            if (momentum != 0) {
              buf[i] = step == 1 ? d : buf[i] * m + keep * d;
              d = nesterov ? d + m * buf[i] : buf[i];
            }
            p[i] = p[i] + neg_lr * d;
            ASSERT_EQ(param.data<float>()[i], p[i]) << "step " << step << ", element " << i;
          }
        }
      }
}

TEST(OptimizerLoops, AdamMatchesTheScalarFormula) {
  for (bool decoupled : {false, true}) {
    SCOPED_TRACE(decoupled ? "AdamW" : "Adam");
    AdamOptions o{.lr = 0.01,
                  .beta1 = 0.9,
                  .beta2 = 0.99,
                  .eps = 1e-8,
                  .weight_decay = 0.05,
                  .decoupled_weight_decay = decoupled};
    std::vector<float> p = random_values(kN, 2), m(kN), v(kN);
    Tensor param = Tensor::from_vector<float>({static_cast<int64_t>(kN)}, p);
    Adam adam({param}, o);
    for (int step = 1; step <= 3; ++step) {
      std::vector<float> g = random_values(kN, 20 + static_cast<uint32_t>(step));
      adam.step({Tensor::from_vector<float>({static_cast<int64_t>(kN)}, g)});
      const float decay = static_cast<float>(1 - o.lr * o.weight_decay);
      const float l2 = decoupled ? 0.0f : static_cast<float>(o.weight_decay);
      const double c1 = 1 - std::pow(o.beta1, step), c2 = 1 - std::pow(o.beta2, step);
      const float neg_step = static_cast<float>(-(o.lr / c1));
      const float c2_sqrt = static_cast<float>(std::sqrt(c2));
      const float b1 = 0.9f, b2 = 0.99f, one_b1 = static_cast<float>(1 - 0.9),
                  one_b2 = static_cast<float>(1 - 0.99), eps = 1e-8f;
      for (size_t i = 0; i < kN; ++i) {
        if (decoupled) p[i] = p[i] * decay;
        float grad = l2 != 0 ? g[i] + l2 * p[i] : g[i];
        m[i] = m[i] * b1 + one_b1 * grad;
        v[i] = v[i] * b2 + one_b2 * (grad * grad);
        float denom = std::sqrt(v[i]) / c2_sqrt + eps;
        p[i] = p[i] + neg_step * (m[i] / denom);
        ASSERT_EQ(param.data<float>()[i], p[i]) << "step " << step << ", element " << i;
      }
    }
  }
}

// Three parameters, 2^16 elements in all, so the update is split across the devices.
std::vector<float> train_split(bool adam, const std::vector<Device>& workers) {
  std::vector<Tensor> params = {Tensor::from_vector<float>({256, 200}, random_values(51200, 3)),
                                Tensor::from_vector<float>({7}, random_values(7, 4)),
                                Tensor::from_vector<float>({14329}, random_values(14329, 5))};
  std::unique_ptr<Optimizer> opt;
  if (adam)
    opt = std::make_unique<Adam>(params, AdamOptions{.lr = 0.01, .weight_decay = 0.01});
  else
    opt = std::make_unique<Sgd>(params, SgdOptions{.lr = 0.1, .momentum = 0.9});
  for (uint32_t step = 0; step < 3; ++step) {
    std::vector<Tensor> grads;
    for (size_t i = 0; i < params.size(); ++i)
      grads.push_back(Tensor::from_vector<float>(
          params[i].shape(), random_values(static_cast<size_t>(params[i].numel()),
                                           100 + step * 10 + static_cast<uint32_t>(i))));
    opt->step(grads, workers);
  }
  std::vector<float> all;
  for (const Tensor& p : params)
    all.insert(all.end(), p.data<float>(), p.data<float>() + p.numel());
  return all;
}

TEST(OptimizerLoops, SplittingTheUpdateOverWorkersChangesNothing) {
  for (bool adam : {false, true}) {
    SCOPED_TRACE(adam ? "Adam" : "SGD");
    std::vector<float> one = train_split(adam, {});
    EXPECT_EQ(train_split(adam, parse_device_list("cpu:0,cpu:1")), one);
    EXPECT_EQ(train_split(adam, parse_device_list("cpu:0,cpu:1,cpu:2")), one);
  }
}

// A parameter exempt from weight decay updates as under the same optimizer without it (torch.optim
// param groups with weight_decay 0); the others keep their decay.
TEST(OptimizerLoops, ExemptParametersUpdateWithoutWeightDecay) {
  const Tensor g = Tensor::from_vector<float>({2}, {0.5f, -1});
  auto run = [&](auto make, double decay, bool exempt_first) {
    std::vector<Tensor> p = {Tensor::from_vector<float>({2}, {1, 2}),
                             Tensor::from_vector<float>({2}, {3, 4})};
    auto optimizer = make(p, decay);
    if (exempt_first) optimizer->exempt_from_weight_decay({true, false});
    optimizer->step({g, g});
    optimizer->step({g, g});
    return std::vector<std::vector<float>>{{p[0].data<float>()[0], p[0].data<float>()[1]},
                                           {p[1].data<float>()[0], p[1].data<float>()[1]}};
  };
  auto sgd = [](std::vector<Tensor> p, double wd) {
    return std::make_unique<Sgd>(p, SgdOptions{.lr = 0.1, .momentum = 0.9, .weight_decay = wd});
  };
  auto adamw = [](std::vector<Tensor> p, double wd) {
    return std::make_unique<Adam>(
        p, AdamOptions{.lr = 0.1, .weight_decay = wd, .decoupled_weight_decay = true});
  };
  for (int k = 0; k < 2; ++k) {
    const auto exempt = k == 0 ? run(sgd, 0.5, true) : run(adamw, 0.5, true);
    const auto none = k == 0 ? run(sgd, 0.0, false) : run(adamw, 0.0, false);
    const auto all = k == 0 ? run(sgd, 0.5, false) : run(adamw, 0.5, false);
    EXPECT_EQ(exempt[0], none[0]) << "optimizer " << k;
    EXPECT_EQ(exempt[1], all[1]) << "optimizer " << k;
    EXPECT_NE(exempt[1], none[1]) << "optimizer " << k;
  }
  Sgd sgd_of_two({Tensor::from_vector<float>({1}, {1}), Tensor::from_vector<float>({1}, {1})},
                 {.lr = 0.1});
  try {
    sgd_of_two.exempt_from_weight_decay({true});
    FAIL() << "a list of the wrong length was taken";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "optimizer: 1 weight-decay exemptions for 2 parameters");
  }
}

// A parameter group with an lr of its own updates as the same optimizer with that lr (torch.optim
// param groups that set "lr"); the others keep the optimizer's, which set_lr still changes.
// Parameters on `device`: on an accelerator the update kernels get each group's lr.
void expect_groups_take_their_lr(Device device) {
  const Tensor g = Tensor::from_vector<float>({2}, {0.5f, -1}).to(device, true);
  auto run = [&](auto make, double lr, std::vector<std::optional<double>> lrs) {
    std::vector<Tensor> p = {Tensor::from_vector<float>({2}, {1, 2}).to(device, true),
                             Tensor::from_vector<float>({2}, {3, 4}).to(device, true)};
    auto optimizer = make(p, lr);
    optimizer->set_parameter_lrs(std::move(lrs));
    optimizer->step({g, g});
    optimizer->set_lr(lr / 2);  // a schedule's next lr: the group without its own follows
    optimizer->step({g, g});
    return std::vector<std::vector<float>>{testing::values_of<float>(p[0].to(Device::cpu())),
                                           testing::values_of<float>(p[1].to(Device::cpu()))};
  };
  auto sgd = [](std::vector<Tensor> p, double lr) {
    return std::make_unique<Sgd>(p, SgdOptions{.lr = lr, .momentum = 0.9, .weight_decay = 0.1});
  };
  auto adamw = [](std::vector<Tensor> p, double lr) {
    return std::make_unique<Adam>(
        p, AdamOptions{.lr = lr, .weight_decay = 0.1, .decoupled_weight_decay = true});
  };
  for (int k = 0; k < 2; ++k) {
    SCOPED_TRACE(k == 0 ? "SGD" : "AdamW");
    const auto grouped =
        k == 0 ? run(sgd, 0.1, {std::nullopt, 0.01}) : run(adamw, 0.1, {std::nullopt, 0.01});
    const auto at_main = k == 0 ? run(sgd, 0.1, {}) : run(adamw, 0.1, {});
    // The group's lr stays 0.01 at both steps, as a constant lr of 0.01 gives.
    const auto fixed = k == 0 ? run(sgd, 0.01, {0.01, 0.01}) : run(adamw, 0.01, {0.01, 0.01});
    EXPECT_EQ(grouped[0], at_main[0]);
    EXPECT_EQ(grouped[1], fixed[1]);
    EXPECT_NE(grouped[1], at_main[1]);
  }
}

class ParameterGroupsOnDevices : public testing::DeviceTest {};

TEST_P(ParameterGroupsOnDevices, TakeTheirOwnLearningRate) {
  expect_groups_take_their_lr(device());
}

DPRUN_ON_EVERY_DEVICE(ParameterGroupsOnDevices);

TEST(OptimizerLoops, ParameterGroupsRefuseBadLearningRates) {
  Sgd sgd_of_two({Tensor::from_vector<float>({1}, {1}), Tensor::from_vector<float>({1}, {1})},
                 {.lr = 0.1});
  EXPECT_EQ(testing::error_of([&] { sgd_of_two.set_parameter_lrs({0.1}); }),
            "optimizer: 1 learning rates for 2 parameters");
  EXPECT_EQ(testing::error_of([&] {
              sgd_of_two.set_parameter_lrs({0.1, -1.0});
            }),
            "optimizer: invalid learning rate -1 for parameter 1");
  EXPECT_TRUE(sgd_of_two.parameter_lrs().empty());
}

}  // namespace
}  // namespace dprun
