// The element updates shared by the CPU loops and the CUDA kernels (ops/math/
// optimizer_functors.h) against values worked out by hand from torch.optim's formulas, the
// choice of specialisation for each setting, and the update kernels' registrations.
#include <gtest/gtest.h>

#include <cmath>

#include "engine/training/optimizer_update.h"
#include "ops/math/optimizer_functors.h"

namespace dprun {
namespace {

// One SGD step of one float64 element: returns the new parameter and updates `buf`.
double sgd(double p, double g, double& buf, SgdOptions o, bool first) {
  double out = 0;
  math::with_sgd_update<double>(o.lr, o.momentum, o.dampening, o.weight_decay, o.nesterov, first,
                                [&](auto op) { out = op(p, g, buf); });
  return out;
}

double adam(double p, double g, double& m, double& v, AdamOptions o, int64_t step) {
  double out = 0;
  math::with_adam_update<double>(o.lr, o.beta1, o.beta2, o.eps, o.weight_decay,
                                 o.decoupled_weight_decay, step,
                                 [&](auto op) { out = op(p, g, m, v); });
  return out;
}

TEST(OptimizerFunctors, SgdByHand) {
  double buf = 123;  // untouched without momentum
  EXPECT_DOUBLE_EQ(sgd(1.0, 0.5, buf, {.lr = 0.1}, true), 0.95);
  EXPECT_EQ(buf, 123);
  // Weight decay 0.01: d = 0.5 + 0.01 * 1 = 0.51.
  EXPECT_DOUBLE_EQ(sgd(1.0, 0.5, buf, {.lr = 0.1, .weight_decay = 0.01}, true), 0.949);
  // Momentum 0.9 with weight decay: the first step's buffer is d = 0.51, p = 1 - 0.051; the
  // second, with g = 0.2: d = 0.2 + 0.01 * 0.949 = 0.20949, buf = 0.9 * 0.51 + 0.20949 =
  // 0.66849, p = 0.949 - 0.066849 = 0.882151.
  SgdOptions momentum{.lr = 0.1, .momentum = 0.9, .weight_decay = 0.01};
  double p = sgd(1.0, 0.5, buf, momentum, true);
  EXPECT_DOUBLE_EQ(p, 0.949);
  EXPECT_DOUBLE_EQ(buf, 0.51);
  p = sgd(p, 0.2, buf, momentum, false);
  EXPECT_DOUBLE_EQ(buf, 0.66849);
  EXPECT_DOUBLE_EQ(p, 0.882151);
  // Dampening 0.5 scales the new gradient in the buffer after the first step:
  // buf = 0.9 * 1 + 0.5 * 0.4 = 1.1, p = 2 - 0.11 = 1.89.
  buf = 1.0;
  EXPECT_DOUBLE_EQ(sgd(2.0, 0.4, buf, {.lr = 0.1, .momentum = 0.9, .dampening = 0.5}, false), 1.89);
  EXPECT_DOUBLE_EQ(buf, 1.1);
  // Nesterov: buf = 0.9 * 1 + 0.4 = 1.3, d = 0.4 + 0.9 * 1.3 = 1.57, p = 2 - 0.157 = 1.843.
  buf = 1.0;
  EXPECT_DOUBLE_EQ(sgd(2.0, 0.4, buf, {.lr = 0.1, .momentum = 0.9, .nesterov = true}, false),
                   1.843);
  EXPECT_DOUBLE_EQ(buf, 1.3);
}

TEST(OptimizerFunctors, AdamAndAdamWByHand) {
  // Step 1, p = 1, g = 0.5, lr = 0.1: m = 0.05, v = 0.00025; denom = sqrt(v) /
  // sqrt(1 - 0.999) + eps = 0.5 + 1e-8; step size lr / (1 - 0.9) = 1; p = 1 - 0.05 / denom.
  AdamOptions o{.lr = 0.1};
  double m = 0, v = 0;
  double p = adam(1.0, 0.5, m, v, o, 1);
  EXPECT_DOUBLE_EQ(m, 0.05);
  EXPECT_DOUBLE_EQ(v, 0.00025);
  EXPECT_NEAR(p, 1 - 0.05 / (0.5 + 1e-8), 1e-15);
  // Step 2 with g = -0.5: m = 0.045 - 0.05 = -0.005, v = 0.00024975 + 0.00025 = 0.00049975;
  // step size 0.1 / 0.19 and sqrt(1 - 0.999^2) = sqrt(0.001999).
  double p2 = adam(p, -0.5, m, v, o, 2);
  EXPECT_DOUBLE_EQ(m, -0.005);
  EXPECT_DOUBLE_EQ(v, 0.00049975);
  EXPECT_NEAR(p2, p + (0.1 / 0.19) * 0.005 / (std::sqrt(0.00049975) / std::sqrt(0.001999) + 1e-8),
              1e-15);
  // Adam's weight decay 0.1 joins the gradient: g = 0.5 + 0.1 * 1 = 0.6.
  m = v = 0;
  EXPECT_NEAR(adam(1.0, 0.5, m, v, {.lr = 0.1, .weight_decay = 0.1}, 1), 1 - 0.06 / (0.6 + 1e-8),
              1e-15);
  EXPECT_DOUBLE_EQ(m, 0.06);
  // AdamW decays the parameter first, by 1 - lr * wd = 0.99, and leaves the gradient alone.
  m = v = 0;
  EXPECT_NEAR(
      adam(1.0, 0.5, m, v, {.lr = 0.1, .weight_decay = 0.1, .decoupled_weight_decay = true}, 1),
      0.99 - 0.05 / (0.5 + 1e-8), 1e-15);
  EXPECT_DOUBLE_EQ(m, 0.05);
}

TEST(OptimizerFunctors, EachSettingGetsItsOwnSpecialisation) {
  struct Case {
    SgdOptions options;
    bool first, momentum;
  };
  for (const Case& c : {Case{{.momentum = 0}, true, false},
                        Case{{.momentum = 0, .weight_decay = 0.1}, false, false},
                        Case{{.momentum = 0.9}, true, true},
                        Case{{.momentum = 0.9, .nesterov = true}, false, true}}) {
    bool uses_momentum = !c.momentum;
    math::with_sgd_update<float>(0.1, c.options.momentum, 0, c.options.weight_decay,
                                 c.options.nesterov, c.first,
                                 [&](auto op) { uses_momentum = decltype(op)::kUsesMomentum; });
    EXPECT_EQ(uses_momentum, c.momentum);
  }
  // The scalars are cast to the element type once, as torch casts its scalar arguments.
  math::with_sgd_update<float>(0.1, 0.9, 0.25, 0.01, false, false, [](auto op) {
    EXPECT_EQ(op.neg_lr, -0.1f);
    EXPECT_EQ(op.momentum, 0.9f);
    EXPECT_EQ(op.keep, 0.75f);
    EXPECT_EQ(op.weight_decay, 0.01f);
  });
}

TEST(OptimizerUpdateKernels, CpuKernelsAreFoundAndRefuseGraphs) {
  std::unique_ptr<OpKernel> sgd =
      create_update_kernel(kSgdUpdateOp, DeviceType::CPU, DType::Float32);
  EXPECT_NE(dynamic_cast<SgdUpdateKernel*>(sgd.get()), nullptr);
  std::unique_ptr<OpKernel> adam =
      create_update_kernel(kAdamUpdateOp, DeviceType::CPU, DType::Float64);
  EXPECT_NE(dynamic_cast<AdamUpdateKernel*>(adam.get()), nullptr);
  try {
    create_update_kernel(kSgdUpdateOp, DeviceType::CPU, DType::Float16);
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "optimizer: no SgdUpdate kernel for float16 on cpu (no kernel for dtype float16)");
  }
  // Inside a graph (a model that names the op), every factory declines.
  Graph graph;
  Node node;
  node.name = "update";
  node.op_type = kSgdUpdateOp;
  node.domain = kDprunDomain;
  KernelInfo info{.node = node, .opset = 1, .device_type = DeviceType::CPU, .graph = &graph};
  info.input_types.push_back(TensorType{DType::Float32, std::nullopt});
  std::string why;
  EXPECT_EQ(KernelRegistry::instance().create(info, &why), nullptr);
  EXPECT_EQ(why, "no kernel accepts this node's attributes");
}

}  // namespace
}  // namespace dprun
