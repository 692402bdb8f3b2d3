// The optimizer ops of the ai.onnx.preview.training domain (ops/training/optimizers.cpp): one
// Adagrad, Momentum (nesterov) and Adam step against values worked out by hand from the ONNX
// formulas, and Adam's refusal of a missing state input.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "engine/error.h"
#include "op_test_util.h"

namespace dprun {
namespace {

using testing::expect_values;
using testing::make_node;
using testing::run_node;

TEST(PreviewTrainingKernels, AdagradMomentumAdam) {
  const std::string dom = "ai.onnx.preview.training";
  Tensor R = Tensor::scalar<float>(0.1f), T = Tensor::scalar<int64_t>(1);
  Tensor X = Tensor::from_vector<float>({1}, {1.f}), G = Tensor::from_vector<float>({1}, {2.f});
  Tensor H = Tensor::from_vector<float>({1}, {3.f});
  Node a = make_node("Adagrad", {"R", "T", "X", "G", "H"}, {"X2", "H2"});
  a.domain = dom;
  a.attributes["decay_factor"] = Attribute::of_float(1.f);
  // r = 0.1 / 2; H' = 3 + 4 = 7; X' = 1 - 0.05 * 2 / sqrt(7).
  auto ao = run_node(a, {R, T, X, G, H}, 1, dom);
  expect_values(ao[0], {1}, {1 - 0.05 * 2 / (std::sqrt(7.0) + 1e-6)});
  expect_values(ao[1], {1}, {7});
  Node m = make_node("Momentum", {"R", "T", "X", "G", "V"}, {"X2", "V2"});
  m.domain = dom;
  m.attributes["alpha"] = Attribute::of_float(0.5f);
  m.attributes["beta"] = Attribute::of_float(0.25f);
  m.attributes["norm_coefficient"] = Attribute::of_float(0.f);
  m.attributes["mode"] = Attribute::of_string("nesterov");
  // V' = 0.5 * 3 + 0.25 * 2 = 2; nesterov X' = 1 - 0.1 * (2 + 0.5 * 2) = 0.7.
  auto mo = run_node(m, {R, T, X, G, H}, 1, dom);
  expect_values(mo[0], {1}, {0.7});
  expect_values(mo[1], {1}, {2});
  Node ad = make_node("Adam", {"R", "T", "X", "G", "V", "H"}, {"X2", "V2", "H2"});
  ad.domain = dom;
  ad.attributes["alpha"] = Attribute::of_float(0.5f);
  ad.attributes["beta"] = Attribute::of_float(0.5f);
  Tensor V = Tensor::from_vector<float>({1}, {1.f});
  // V' = 0.5 + 1 = 1.5; H' = 1.5 + 2 = 3.5; lr = 0.1 * sqrt(0.5) / 0.5.
  auto o = run_node(ad, {R, T, X, G, V, H}, 1, dom);
  expect_values(o[0], {1}, {1 - 0.1 * std::sqrt(0.5) / 0.5 * 1.5 / (std::sqrt(3.5) + 1e-6)});
  expect_values(o[1], {1}, {1.5});
  expect_values(o[2], {1}, {3.5});
  EXPECT_THROW(run_node(ad, {R, T, X, G, V}, 1, dom), Error);
}

}  // namespace
}  // namespace dprun
