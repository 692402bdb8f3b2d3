// Relu's gradient as one ReluGrad node (engine/rewrites/op_fusion.h): which chains the CPU
// backend fuses, and the fused graph against the unfused one, bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "engine/rewrites/rewrite_domain.h"
#include "gradient_check.h"
#include "op_test_util.h"

namespace dprun {
namespace {

using namespace dprun::testing;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// The forward Relu and dX for the seed dY, in `dtype`.
std::shared_ptr<Graph> relu_gradient(DType dtype) {
  Input x = in("x", {2, 4}, 1);
  if (dtype == DType::Float32) x.value = to_float32(x.value);
  auto forward = make_graph({node("Relu", {"x"}, {"y"})}, {x}, "y", 17, Decl::Full);
  auto g = std::make_shared<Graph>(*forward);
  GradientResult r = build_gradient(*forward, GradientSpec{{"x"}, "y", "dY"});
  g->inputs.push_back({"dY", {dtype, std::nullopt}});
  g->nodes.insert(g->nodes.end(), r.nodes.begin(), r.nodes.end());
  g->outputs = {{r.gradients[0], {}}};
  return g;
}

// X with positives, zeros of both signs, negatives and NaN; dY with infinities and NaN where X
// is not positive too.
std::vector<Tensor> feeds(DType dtype) {
  const Tensor x =
      Tensor::from_vector<double>({2, 4}, {1.5, 0.0, -0.0, -2.0, kNaN, 3.0, -1.0, 2.0});
  const Tensor dy =
      Tensor::from_vector<double>({2, 4}, {0.5, kInf, 2.0, -kInf, 1.0, kNaN, kNaN, -3.0});
  if (dtype == DType::Float32) return {to_float32(x), to_float32(dy)};
  return {x, dy};
}

Model model(std::shared_ptr<Graph> g, bool fuse) {
  return Model(std::move(g), Device::cpu(), {.channels_last = false, .fuse_ops = fuse});
}

// Equal bit patterns (NaN included).
void expect_same_bits(const Tensor& got, const Tensor& want) {
  ASSERT_EQ(got.shape(), want.shape());
  ASSERT_EQ(got.dtype(), want.dtype());
  EXPECT_EQ(std::memcmp(got.raw_data(), want.raw_data(), got.nbytes()), 0);
}

TEST(ReluGradFusion, GivesTheUnfusedGradientBitForBit) {
  for (DType dtype : {DType::Float32, DType::Float64}) {
    SCOPED_TRACE(dtype_name(dtype));
    auto g = relu_gradient(dtype);
    Model fused = model(g, true);
    const Graph& plan = *fused.plan()->graph_ptr();
    EXPECT_EQ(count_ops(plan, "ReluGrad"), 1);
    EXPECT_EQ(count_ops(plan, "Greater"), 0);
    EXPECT_EQ(count_ops(plan, "Cast"), 0);
    const Tensor got = fused.run(feeds(dtype))[0];
    expect_same_bits(got, model(g, false).run(feeds(dtype))[0]);
    // By hand: dY where X > 0; dY * 0 elsewhere, NaN for an infinite or NaN dY.
    EXPECT_EQ(got.item_as_double(0), 0.5);
    EXPECT_TRUE(std::isnan(got.item_as_double(1)));
    EXPECT_EQ(got.item_as_double(2), 0.0);
    EXPECT_TRUE(std::isnan(got.item_as_double(3)));
    EXPECT_EQ(got.item_as_double(4), 0.0);
    EXPECT_TRUE(std::isnan(got.item_as_double(5)));
    EXPECT_TRUE(std::isnan(got.item_as_double(6)));
    EXPECT_EQ(got.item_as_double(7), -3.0);
  }
}

// Mul(dy, Cast(Greater(x, zero), to)) by hand, dy [4] broadcast against x [2, 4].
std::shared_ptr<Graph> mask_chain(float zero, int64_t to, bool mask_first) {
  auto g = std::make_shared<Graph>();
  g->opset_imports[""] = 17;
  g->inputs = {{"x", {DType::Float32, SymbolicShape{Dim::known(2), Dim::known(4)}}},
               {"dy", {DType::Float32, SymbolicShape{Dim::known(4)}}}};
  g->initializers["zero"] = Tensor::from_vector<float>({}, {zero});
  g->nodes = {node("Greater", {"x", "zero"}, {"positive"}),
              node("Cast", {"positive"}, {"mask"}, {{"to", Attribute::of_int(to)}}),
              node("Mul",
                   mask_first ? std::vector<std::string>{"mask", "dy"}
                              : std::vector<std::string>{"dy", "mask"},
                   {"dx"})};
  g->outputs = {{"dx", {}}};
  return g;
}

TEST(ReluGradFusion, BroadcastsAsTheMulDoesWithEitherOperandOrder) {
  const Tensor x = Tensor::from_vector<float>({2, 4}, {1, -1, 2, 0, -3, 4, 5, -6});
  const Tensor dy = Tensor::from_vector<float>({4}, {10, 20, 30, 40});
  for (bool mask_first : {false, true}) {
    auto g = mask_chain(0.0f, static_cast<int64_t>(DType::Float32), mask_first);
    Model fused = model(g, true);
    EXPECT_EQ(count_ops(*fused.plan()->graph_ptr(), "ReluGrad"), 1);
    const Tensor got = fused.run(std::vector<Tensor>{x, dy})[0];
    ASSERT_EQ(got.shape(), (Shape{2, 4}));
    EXPECT_EQ(std::vector<float>(got.data<float>(), got.data<float>() + 8),
              (std::vector<float>{10, 0, 30, 0, 0, 20, 30, 0}));
  }
}

TEST(ReluGradFusion, LeavesAloneWhatItDoesNotCompute) {
  auto fused_count = [](const std::shared_ptr<Graph>& g) {
    return count_ops(*model(g, true).plan()->graph_ptr(), "ReluGrad");
  };
  const int64_t f32 = static_cast<int64_t>(DType::Float32);
  EXPECT_EQ(fused_count(mask_chain(0.0f, f32, false)), 1);
  EXPECT_EQ(fused_count(mask_chain(0.5f, f32, false)), 0);  // not Relu's threshold
  EXPECT_EQ(fused_count(mask_chain(0.0f, static_cast<int64_t>(DType::Float64), false)), 0);
  auto g = mask_chain(0.0f, f32, false);
  g->outputs.push_back({"mask", {}});  // the mask is a result too
  EXPECT_EQ(fused_count(g), 0);
  // float16: the kernel computes in float32 and float64 only.
  g = mask_chain(0.0f, static_cast<int64_t>(DType::Float16), false);
  g->initializers["zero"] = Tensor::zeros({}, DType::Float16);
  g->inputs[0].type.dtype = g->inputs[1].type.dtype = DType::Float16;
  EXPECT_EQ(fused_count(g), 0);
}

TEST(ReluGradFusion, NamesMismatchedTypes) {
  Node n = make_node("ReluGrad", {"dy", "x"}, {"dx"});
  n.domain = kRewriteDomain;
  n.name = "relu_grad";
  EXPECT_EQ(run_node_error(
                n, {Tensor::from_vector<float>({1}, {1}), Tensor::from_vector<double>({1}, {1})}, 1,
                kRewriteDomain),
            "[ReluGrad] node 'relu_grad': inputs have different dtypes float32 and float64");
}

}  // namespace
}  // namespace dprun
