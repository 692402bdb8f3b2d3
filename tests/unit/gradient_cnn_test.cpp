// Finite-difference cases for the gradient rules of the CNN families (BatchNormalization,
// pooling, activations, Clip, Dropout, Pad, Max/Min), plus hand-computed checks of the
// training-mode forward kernels they rely on. tests/unit/gradient_test.cpp runs the cases
// through the registry.
#include <unistd.h>
#include <algorithm>
#include <cstdio>
#include <numeric>

#include "gradient_check.h"
#include "loader/onnx_loader.h"

namespace dprun {
namespace {

using namespace dprun::testing;

// Inputs whose elements are all distinct and at least 1 / numel apart, so that max-based ops
// select the same element under the finite-difference step.
Input distinct(const std::string& name, const Shape& shape, uint32_t seed) {
  std::vector<double> v(static_cast<size_t>(shape_numel(shape)));
  std::iota(v.begin(), v.end(), 0.0);
  std::mt19937 rng(seed);
  std::shuffle(v.begin(), v.end(), rng);
  for (double& x : v) x = (x + 0.5) / static_cast<double>(v.size()) * 2 - 1;
  return {name, Tensor::from_vector<double>(shape, v)};
}

Input constant(const std::string& name, Tensor t) {
  return {name, std::move(t), true};
}

// The ONNX checker accepts the training graph: every emitted node exists at the graph's opset
// with valid attributes. (The checker wants full types on the graph's inputs and outputs.)
void expect_checker_accepts(const std::vector<Node>& nodes, const std::vector<Input>& inputs,
                            const std::string& y, const std::vector<std::string>& xs,
                            int64_t opset) {
  auto forward = make_graph(nodes, inputs, y, opset, Decl::Full);
  int symbol = 0;
  Tensor y0 = run_forward(forward, feeds_of(inputs));
  forward->outputs[0].type = {y0.dtype(), declare(y0.shape(), Decl::Full, symbol)};
  auto train = training_graph(*forward, xs);
  train->inputs.back().type.shape = declare(y0.shape(), Decl::Full, symbol);
  for (size_t k = 0; k < xs.size(); ++k)
    for (const auto& input : inputs)
      if (input.name == xs[k])
        train->outputs[k].type = {input.value.dtype(),
                                  declare(input.value.shape(), Decl::Full, symbol)};
  std::string path = ::testing::TempDir() + "gradient_cnn_" + std::to_string(::getpid()) + ".onnx";
  save_graph(*train, train->initializers, path);
  EXPECT_NO_THROW(load_graph(path)) << "opset " << opset;
  std::remove(path.c_str());
}

// Finite differences at each opset with full declarations, and the checker at each opset.
void check_at(const std::vector<Node>& nodes, const std::vector<Input>& inputs,
              const std::string& y, const std::vector<std::string>& xs,
              const std::vector<int64_t>& opsets) {
  for (int64_t opset : opsets) {
    check_gradients(nodes, inputs, y, xs, opset, Decl::Full);
    expect_checker_accepts(nodes, inputs, y, xs, opset);
  }
}

// Runs `train` on `feeds` and returns its outputs.
std::vector<Tensor> run_graph(std::shared_ptr<Graph> g, const std::vector<Tensor>& feeds) {
  Model m(g, Device::cpu());
  return m.run(feeds);
}

// ---- BatchNormalization ----

std::vector<Input> bn_inputs(const Shape& x_shape, const Shape& param_shape) {
  return {in("x", x_shape, 1), in("scale", param_shape, 2, 0.5, 2.0), in("b", param_shape, 3),
          in("mean", param_shape, 4), in("var", param_shape, 5, 0.2, 1.5)};
}

const std::vector<std::string> kBnAll = {"x", "scale", "b", "mean", "var"};

DPRUN_GRADIENT_CASE(BatchNormalization, BatchNormInference) {
  auto bn = node("BatchNormalization", {"x", "scale", "b", "mean", "var"}, {"y"},
                 {{"epsilon", Attribute::of_float(1e-3f)}});
  check_all_ways({bn}, bn_inputs({2, 3, 2, 2}, {3}), "y", kBnAll, true);
  check_all_ways({bn}, bn_inputs({4, 3}, {3}), "y", kBnAll, true);
  check_at({bn}, bn_inputs({2, 3, 5}, {3}), "y", kBnAll, {7, 9, 15});
  bn.attributes["training_mode"] = Attribute::of_int(0);
  check_at({bn}, bn_inputs({2, 3, 2, 2}, {3}), "y", kBnAll, {14, 15});
}

DPRUN_GRADIENT_CASE(BatchNormalization, BatchNormInferencePerActivation) {
  // Before opset 9, spatial=0: parameters per (channel, position), shaped [C, D1, ...] or flat.
  auto bn = node("BatchNormalization", {"x", "scale", "b", "mean", "var"}, {"y"},
                 {{"spatial", Attribute::of_int(0)}});
  check_at({bn}, bn_inputs({3, 2, 2, 3}, {2, 2, 3}), "y", kBnAll, {7});
  check_at({bn}, bn_inputs({3, 2, 2, 3}, {12}), "y", kBnAll, {7});
}

DPRUN_GRADIENT_CASE(BatchNormalization, BatchNormTraining) {
  // Opset 14+: training_mode=1, outputs Y and the running statistics. Y does not depend on
  // the given mean and var, whose gradients are zero.
  auto bn =
      node("BatchNormalization", {"x", "scale", "b", "mean", "var"}, {"y", "rm", "rv"},
           {{"training_mode", Attribute::of_int(1)}, {"epsilon", Attribute::of_float(1e-2f)}});
  for (int64_t opset : {15, 17, 18}) {
    check_gradients({bn}, bn_inputs({3, 2, 2, 3}, {2}), "y", kBnAll, opset, Decl::Full);
    check_gradients({bn}, bn_inputs({3, 2, 2, 3}, {2}), "y", kBnAll, opset, Decl::Symbolic);
  }
  check_gradients({bn}, bn_inputs({5, 3}, {3}), "y", kBnAll, 15, Decl::Full);
  expect_checker_accepts({bn}, bn_inputs({3, 2, 2, 3}, {2}), "y", kBnAll, 15);
}

DPRUN_GRADIENT_CASE(BatchNormalization, BatchNormTrainingBeforeOpset14) {
  // Opsets 9-13: training is the form with the extra outputs (running and saved statistics).
  auto bn =
      node("BatchNormalization", {"x", "scale", "b", "mean", "var"}, {"y", "rm", "rv", "sm", "sv"});
  check_at({bn}, bn_inputs({3, 2, 2, 3}, {2}), "y", kBnAll, {9, 12});
  // Opset 7, spatial=0: batch statistics per (channel, position), over N only. (Not asking
  // for mean and var: their zero gradients would need ConstantOfShape, from opset 9.)
  bn.attributes["spatial"] = Attribute::of_int(0);
  check_at({bn}, bn_inputs({4, 2, 3}, {2, 3}), "y", {"x", "scale", "b"}, {7});
}

DPRUN_GRADIENT_CASE(BatchNormalization, BatchNormSymbolicBatch) {
  // As PyTorch exports it: a dynamic batch, the other dims static.
  auto train =
      node("BatchNormalization", {"x", "scale", "b", "mean", "var"}, {"y", "rm", "rv"},
           {{"training_mode", Attribute::of_int(1)}, {"epsilon", Attribute::of_float(1e-2f)}});
  auto infer = node("BatchNormalization", {"x", "scale", "b", "mean", "var"}, {"y"});
  for (const Node& bn : {train, infer})
    check_gradients({bn}, bn_inputs({3, 2, 2, 3}, {2}), "y", kBnAll, 15, Decl::Batch);
}

// population variance and mean of channel c of x [N, C, S].
void batch_stats(const Tensor& x, int64_t c, double& mean, double& var) {
  const int64_t n = x.dim(0), channels = x.dim(1), s = x.numel() / (n * channels);
  double sum = 0, sq = 0;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < s; ++j) sum += x.item_as_double((i * channels + c) * s + j);
  mean = sum / static_cast<double>(n * s);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < s; ++j) {
      double d = x.item_as_double((i * channels + c) * s + j) - mean;
      sq += d * d;
    }
  var = sq / static_cast<double>(n * s);
}

TEST(GradientCnn, BatchNormTrainingRunningStatistics) {
  // ONNX: running = input * momentum + batch * (1 - momentum), the batch variance being the
  // population variance (ReduceVar); torch.onnx exports momentum as 1 - torch's momentum.
  std::vector<Input> inputs = bn_inputs({3, 2, 2, 2}, {2});
  std::vector<Tensor> feeds = feeds_of(inputs);
  const double momentum = 0.8;
  for (int64_t opset : {12, 15}) {
    SCOPED_TRACE("opset " + std::to_string(opset));
    std::vector<std::string> outs = {"y", "rm", "rv"};
    if (opset < 14) outs.insert(outs.end(), {"sm", "sv"});
    auto bn = node("BatchNormalization", {"x", "scale", "b", "mean", "var"}, outs,
                   {{"momentum", Attribute::of_float(static_cast<float>(momentum))}});
    if (opset >= 14) bn.attributes["training_mode"] = Attribute::of_int(1);
    auto g = make_graph({bn}, inputs, "y", opset, Decl::Full);
    for (size_t k = 1; k < outs.size(); ++k) g->outputs.push_back({outs[k], {}});
    std::vector<Tensor> r = run_graph(g, feeds);
    const float m = static_cast<float>(momentum);  // the attribute is a float
    for (int64_t c = 0; c < 2; ++c) {
      double mean = 0, var = 0;
      batch_stats(feeds[0], c, mean, var);
      EXPECT_NEAR(r[1].item_as_double(c), feeds[3].item_as_double(c) * m + mean * (1 - m), 1e-12);
      EXPECT_NEAR(r[2].item_as_double(c), feeds[4].item_as_double(c) * m + var * (1 - m), 1e-12);
      if (opset < 14) {
        EXPECT_NEAR(r[3].item_as_double(c), mean, 1e-12);
        EXPECT_NEAR(r[4].item_as_double(c), var, 1e-12);
      }
      // Y uses the batch statistics; element (0, c, 0, 0) is at c * 4.
      double expect = (feeds[0].item_as_double(c * 4) - mean) / std::sqrt(var + 1e-5f) *
                          feeds[1].item_as_double(c) +
                      feeds[2].item_as_double(c);
      EXPECT_NEAR(r[0].item_as_double(c * 4), expect, 1e-9);
    }
  }
}

TEST(GradientCnn, BatchNormSavedStatisticsHaveNoGradient) {
  auto bn =
      node("BatchNormalization", {"x", "scale", "b", "mean", "var"}, {"y", "rm", "rv", "sm", "sv"});
  auto g = make_graph({bn}, bn_inputs({3, 2, 2}, {2}), "sm", 12, Decl::Full);
  EXPECT_THROW(build_gradient(*g, GradientSpec{{"x"}, "sm"}), Error);
  // The running statistics are state: a loss that reads them gets no gradient through them.
  auto r = build_gradient(*g, GradientSpec{{"x"}, "rm"});
  EXPECT_EQ(r.gradients.size(), 1u);
}

// ---- MaxPool ----

DPRUN_GRADIENT_CASE(MaxPool, MaxPoolOverlappingWindows) {
  // ResNet's stem pool: 3x3, stride 2, pad 1. Every opset path: ScatterElements with
  // reduction (16+), phase groups with ScatterElements (11-15), Scatter and Slice steps (10),
  // Scatter and Gather (9). With and without the node's Indices output.
  std::map<std::string, Attribute> attrs = {{"kernel_shape", Attribute::of_ints({3, 3})},
                                            {"strides", Attribute::of_ints({2, 2})},
                                            {"pads", Attribute::of_ints({1, 1, 1, 1})}};
  for (bool with_indices : {false, true}) {
    SCOPED_TRACE(with_indices ? "with Indices" : "without Indices");
    std::vector<std::string> outs = {"y"};
    if (with_indices) outs.push_back("idx");
    auto mp = node("MaxPool", {"x"}, outs, attrs);
    check_all_ways({mp}, {distinct("x", {2, 2, 7, 7}, 1)}, "y", {"x"});
    check_at({mp}, {distinct("x", {1, 2, 6, 5}, 2)}, "y", {"x"}, {9, 10, 12, 16});
  }
}

DPRUN_GRADIENT_CASE(MaxPool, MaxPoolAttributes) {
  // Dilations, asymmetric pads, ceil_mode (a last window cut short), unequal strides.
  auto mp = node("MaxPool", {"x"}, {"y"},
                 {{"kernel_shape", Attribute::of_ints({3, 2})},
                  {"strides", Attribute::of_ints({2, 1})},
                  {"dilations", Attribute::of_ints({1, 2})},
                  {"pads", Attribute::of_ints({1, 0, 0, 1})},
                  {"ceil_mode", Attribute::of_int(1)}});
  check_at({mp}, {distinct("x", {2, 1, 6, 7}, 3)}, "y", {"x"}, {10, 12, 17});
  check_gradients({mp}, {distinct("x", {2, 1, 6, 7}, 3)}, "y", {"x"}, 12, Decl::None);
  // auto_pad and storage_order=1 (its column-major Indices are not used).
  auto same = node("MaxPool", {"x"}, {"y", "idx"},
                   {{"kernel_shape", Attribute::of_ints({2, 3})},
                    {"auto_pad", Attribute::of_string("SAME_UPPER")},
                    {"storage_order", Attribute::of_int(1)}});
  check_at({same}, {distinct("x", {1, 2, 4, 5}, 4)}, "y", {"x"}, {9, 12, 17});
}

DPRUN_GRADIENT_CASE(MaxPool, MaxPool1DAndNonOverlapping) {
  auto mp1 =
      node("MaxPool", {"x"}, {"y"},
           {{"kernel_shape", Attribute::of_ints({3})}, {"pads", Attribute::of_ints({1, 2})}});
  check_at({mp1}, {distinct("x", {2, 3, 9}, 5)}, "y", {"x"}, {9, 12, 17});
  auto mp2 =
      node("MaxPool", {"x"}, {"y"},
           {{"kernel_shape", Attribute::of_ints({2, 2})}, {"strides", Attribute::of_ints({2, 2})}});
  check_at({mp2}, {distinct("x", {1, 2, 4, 6}, 6)}, "y", {"x"}, {9, 12, 17});
  // A phase group with no windows (one output, two phases per axis).
  auto one = node("MaxPool", {"x"}, {"y"},
                  {{"kernel_shape", Attribute::of_ints({3, 3})},
                   {"strides", Attribute::of_ints({2, 2})},
                   {"pads", Attribute::of_ints({1, 1, 1, 1})}});
  check_at({one}, {distinct("x", {1, 1, 2, 2}, 7)}, "y", {"x"}, {9, 12, 17});
}

DPRUN_GRADIENT_CASE(MaxPool, MaxPoolSymbolicBatch) {
  auto mp = node("MaxPool", {"x"}, {"y"},
                 {{"kernel_shape", Attribute::of_ints({3, 3})},
                  {"strides", Attribute::of_ints({2, 2})},
                  {"pads", Attribute::of_ints({1, 1, 1, 1})}});
  for (int64_t opset : {9, 10, 12, 16})
    check_gradients({mp}, {distinct("x", {3, 2, 6, 5}, 2)}, "y", {"x"}, opset, Decl::Batch);
}

TEST(GradientCnn, MaxPoolOverlapSumsRepeatedIndices) {
  // A 4x4 plane, 3x3 windows, stride 1: all four windows select element 6, the largest.
  std::vector<double> v(16);
  std::iota(v.begin(), v.end(), 0.0);
  v[6] = 100;
  for (int64_t opset : {12, 17}) {
    auto g =
        make_graph({node("MaxPool", {"x"}, {"y"}, {{"kernel_shape", Attribute::of_ints({3, 3})}})},
                   {{"x", Tensor::from_vector<double>({1, 1, 4, 4}, v)}}, "y", opset, Decl::Full);
    auto out = run_graph(training_graph(*g, {"x"}),
                         {Tensor::from_vector<double>({1, 1, 4, 4}, v),
                          Tensor::from_vector<double>({1, 1, 2, 2}, {1, 2, 3, 4})});
    std::vector<double> expect(16, 0.0);
    expect[6] = 1 + 2 + 3 + 4;
    expect_values(out[0], {1, 1, 4, 4}, expect, 0);
  }
}

// ---- AveragePool, global pools ----

DPRUN_GRADIENT_CASE(AveragePool, AveragePoolPadsAndCounts) {
  for (int include : {0, 1}) {
    SCOPED_TRACE("count_include_pad " + std::to_string(include));
    auto ap = node("AveragePool", {"x"}, {"y"},
                   {{"kernel_shape", Attribute::of_ints({3, 3})},
                    {"strides", Attribute::of_ints({2, 2})},
                    {"pads", Attribute::of_ints({1, 1, 1, 1})},
                    {"count_include_pad", Attribute::of_int(include)}});
    check_at({ap}, {in("x", {2, 2, 7, 7}, 1)}, "y", {"x"}, {7, 12, 17});
    // Windows that stop short of X's end (8 = 3 * 2 + 2: the last row is never read).
    auto short_end = node("AveragePool", {"x"}, {"y"},
                          {{"kernel_shape", Attribute::of_ints({3, 2})},
                           {"strides", Attribute::of_ints({2, 3})},
                           {"pads", Attribute::of_ints({0, 1, 0, 0})},
                           {"count_include_pad", Attribute::of_int(include)}});
    check_at({short_end}, {in("x", {1, 2, 8, 7}, 2)}, "y", {"x"}, {7, 17});
    // ceil_mode: the last window runs past the padded end.
    auto ceil = node("AveragePool", {"x"}, {"y"},
                     {{"kernel_shape", Attribute::of_ints({3, 2})},
                      {"strides", Attribute::of_ints({2, 2})},
                      {"pads", Attribute::of_ints({1, 0, 0, 0})},
                      {"ceil_mode", Attribute::of_int(1)},
                      {"count_include_pad", Attribute::of_int(include)}});
    check_at({ceil}, {in("x", {1, 1, 6, 5}, 3)}, "y", {"x"}, {10, 17});
  }
}

DPRUN_GRADIENT_CASE(AveragePool, AveragePoolShapes) {
  // 1-D with overlapping windows; auto_pad; 3-D; dilations (opset 19).
  check_at({node("AveragePool", {"x"}, {"y"}, {{"kernel_shape", Attribute::of_ints({2})}})},
           {in("x", {2, 3, 6}, 1)}, "y", {"x"}, {12});
  check_at({node("AveragePool", {"x"}, {"y"},
                 {{"kernel_shape", Attribute::of_ints({2, 3})},
                  {"strides", Attribute::of_ints({2, 2})},
                  {"auto_pad", Attribute::of_string("SAME_LOWER")}})},
           {in("x", {1, 2, 5, 5}, 2)}, "y", {"x"}, {12});
  check_at({node("AveragePool", {"x"}, {"y"},
                 {{"kernel_shape", Attribute::of_ints({2, 2, 2})},
                  {"pads", Attribute::of_ints({0, 1, 0, 1, 0, 0})}})},
           {in("x", {1, 1, 3, 3, 4}, 3)}, "y", {"x"}, {12});
  check_gradients({node("AveragePool", {"x"}, {"y"},
                        {{"kernel_shape", Attribute::of_ints({2, 2})},
                         {"dilations", Attribute::of_ints({2, 1})},
                         {"pads", Attribute::of_ints({1, 1, 1, 1})}})},
                  {in("x", {1, 2, 5, 4}, 4)}, "y", {"x"}, 19, Decl::Full);
}

DPRUN_GRADIENT_CASE(GlobalAveragePool, GlobalAveragePoolCases) {
  check_all_ways({node("GlobalAveragePool", {"x"}, {"y"})}, {in("x", {2, 3, 4, 5}, 1)}, "y", {"x"});
  check_at({node("GlobalAveragePool", {"x"}, {"y"})}, {in("x", {2, 3, 4}, 2)}, "y", {"x"}, {8, 12});
}

DPRUN_GRADIENT_CASE(AveragePool, AveragePoolSymbolicBatch) {
  auto ap = node("AveragePool", {"x"}, {"y"},
                 {{"kernel_shape", Attribute::of_ints({3, 2})},
                  {"strides", Attribute::of_ints({2, 3})},
                  {"pads", Attribute::of_ints({1, 1, 0, 0})}});
  for (int64_t opset : {7, 17})
    check_gradients({ap}, {in("x", {3, 2, 8, 7}, 2)}, "y", {"x"}, opset, Decl::Batch);
}

DPRUN_GRADIENT_CASE(GlobalAveragePool, GlobalAveragePoolSymbolicBatch) {
  check_gradients({node("GlobalAveragePool", {"x"}, {"y"})}, {in("x", {3, 2, 4, 5}, 1)}, "y", {"x"},
                  15, Decl::Batch);
}

DPRUN_GRADIENT_CASE(GlobalMaxPool, GlobalMaxPoolCases) {
  check_all_ways({node("GlobalMaxPool", {"x"}, {"y"})}, {distinct("x", {2, 3, 4, 5}, 1)}, "y",
                 {"x"}, true);
  check_at({node("GlobalMaxPool", {"x"}, {"y"})}, {distinct("x", {2, 3, 4}, 2)}, "y", {"x"},
           {7, 12});
}

TEST(GradientCnn, GlobalMaxPoolSplitsTies) {
  auto g = make_graph({node("GlobalMaxPool", {"x"}, {"y"})},
                      {{"x", Tensor::from_vector<double>({1, 1, 2, 2}, {3, 1, 3, 2})}}, "y", 17,
                      Decl::Full);
  auto out =
      run_graph(training_graph(*g, {"x"}), {Tensor::from_vector<double>({1, 1, 2, 2}, {3, 1, 3, 2}),
                                            Tensor::from_vector<double>({1, 1, 1, 1}, {4})});
  expect_values(out[0], {1, 1, 2, 2}, {2, 0, 2, 0}, 0);
}

// ---- activations ----

void check_activation(const Node& n, double lo, double hi, const std::vector<int64_t>& opsets) {
  for (int64_t opset : opsets)
    for (Decl decl : {Decl::Full, Decl::Symbolic, Decl::None})
      check_gradients({n}, {in("x", {3, 5}, 9, lo, hi)}, "y", {"x"}, opset, decl);
  expect_checker_accepts({n}, {in("x", {3, 5}, 9, lo, hi)}, "y", {"x"}, opsets.front());
}

DPRUN_GRADIENT_CASE(LeakyRelu, LeakyReluAlpha) {
  check_activation(node("LeakyRelu", {"x"}, {"y"}), -1, 1, {7, 17});
  check_activation(node("LeakyRelu", {"x"}, {"y"}, {{"alpha", Attribute::of_float(0.3f)}}), -1, 1,
                   {17});
}

DPRUN_GRADIENT_CASE(HardSwish, HardSwishRegions) {
  check_activation(node("HardSwish", {"x"}, {"y"}), -5, 5, {14, 17});
}

DPRUN_GRADIENT_CASE(HardSigmoid, HardSigmoidRegions) {
  check_activation(node("HardSigmoid", {"x"}, {"y"}), -4, 4, {7, 17});
  check_activation(
      node("HardSigmoid", {"x"}, {"y"},
           {{"alpha", Attribute::of_float(0.3f)}, {"beta", Attribute::of_float(0.4f)}}),
      -4, 4, {17});
}

DPRUN_GRADIENT_CASE(Abs, AbsSigns) {
  check_activation(node("Abs", {"x"}, {"y"}), -1, 1, {7, 13});
}

DPRUN_GRADIENT_CASE(Elu, EluAlpha) {
  check_activation(node("Elu", {"x"}, {"y"}), -2, 2, {7});
  check_activation(node("Elu", {"x"}, {"y"}, {{"alpha", Attribute::of_float(0.7f)}}), -2, 2, {17});
}

DPRUN_GRADIENT_CASE(Selu, SeluDefaults) {
  check_activation(node("Selu", {"x"}, {"y"}), -2, 2, {7, 17});
  check_activation(
      node("Selu", {"x"}, {"y"},
           {{"alpha", Attribute::of_float(1.5f)}, {"gamma", Attribute::of_float(2.0f)}}),
      -2, 2, {17});
}

DPRUN_GRADIENT_CASE(Softplus, SoftplusRandom) {
  check_activation(node("Softplus", {"x"}, {"y"}), -3, 3, {7, 17});
}

// ---- Clip ----

DPRUN_GRADIENT_CASE(Clip, ClipAttributeBounds) {
  // Opsets 6-10: bounds are attributes (numpy broadcasting of the emitted ops needs 7).
  check_at({node("Clip", {"x"}, {"y"},
                 {{"min", Attribute::of_float(-0.5f)}, {"max", Attribute::of_float(0.6f)}})},
           {in("x", {3, 4}, 1)}, "y", {"x"}, {7, 10});
  check_at({node("Clip", {"x"}, {"y"}, {{"min", Attribute::of_float(0.1f)}})}, {in("x", {3, 4}, 2)},
           "y", {"x"}, {10});
}

DPRUN_GRADIENT_CASE(Clip, ClipInputBounds) {
  // Constant bounds, as ReLU6 exports; one bound omitted; no bounds.
  Input lo = constant("lo", Tensor::scalar<double>(-0.5));
  Input hi = constant("hi", Tensor::scalar<double>(0.6));
  check_all_ways({node("Clip", {"x", "lo", "hi"}, {"y"})}, {in("x", {3, 4}, 1), lo, hi}, "y",
                 {"x"});
  check_at({node("Clip", {"x", "", "hi"}, {"y"})}, {in("x", {3, 4}, 2), hi}, "y", {"x"}, {11, 13});
  check_at({node("Clip", {"x", "lo"}, {"y"})}, {in("x", {3, 4}, 3), lo}, "y", {"x"}, {12});
  check_at({node("Clip", {"x"}, {"y"})}, {in("x", {3, 4}, 4)}, "y", {"x"}, {13});
}

DPRUN_GRADIENT_CASE(Clip, ClipDifferentiatedBounds) {
  // Bounds fed as inputs and differentiated, including lo > hi (everything clips to hi).
  auto clip = node("Clip", {"x", "lo", "hi"}, {"y"});
  auto x = in("x", {3, 4}, 1);
  check_all_ways({clip},
                 {x, {"lo", Tensor::scalar<double>(-0.45)}, {"hi", Tensor::scalar<double>(0.55)}},
                 "y", {"x", "lo", "hi"});
  check_at({clip}, {x, {"lo", Tensor::scalar<double>(0.3)}, {"hi", Tensor::scalar<double>(-0.2)}},
           "y", {"x", "lo", "hi"}, {12});
  check_at({node("Clip", {"x", "", "hi"}, {"y"})}, {x, {"hi", Tensor::scalar<double>(0.15)}}, "y",
           {"x", "hi"}, {12});
}

// ---- Dropout ----

DPRUN_GRADIENT_CASE(Dropout, DropoutInference) {
  // Before opset 12, and from 12 without a true training_mode: the identity.
  check_at({node("Dropout", {"x"}, {"y", "mask"}, {{"ratio", Attribute::of_float(0.3f)}})},
           {in("x", {3, 4}, 1)}, "y", {"x"}, {7, 10});
  check_at({node("Dropout", {"x"}, {"y"})}, {in("x", {3, 4}, 1)}, "y", {"x"}, {13});
  Input ratio = constant("ratio", Tensor::scalar<double>(0.4));
  Input off = constant("training", Tensor::scalar<bool>(false));
  check_at({node("Dropout", {"x", "ratio", "training"}, {"y"})}, {in("x", {3, 4}, 1), ratio, off},
           "y", {"x"}, {12, 17});
}

DPRUN_GRADIENT_CASE(Dropout, DropoutTrainingRatioZero) {
  // Training mode with ratio 0 keeps every element: deterministic, so finite differences apply.
  Input ratio = constant("ratio", Tensor::scalar<float>(0.0f));
  Input on = constant("training", Tensor::scalar<bool>(true));
  check_at({node("Dropout", {"x", "ratio", "training"}, {"y", "mask"})},
           {in("x", {3, 4}, 1), ratio, on}, "y", {"x"}, {12, 13, 17});
}

TEST(GradientCnn, DropoutDroppingNothingPassesTheGradientThrough) {
  // A constant ratio of 0 in training mode (PyTorch's Dropout(p=0.0) exported for training):
  // dX = dY, one Identity, no mask needed.
  for (bool with_mask : {true, false}) {
    const std::vector<std::string> outputs =
        with_mask ? std::vector<std::string>{"y", "mask"} : std::vector<std::string>{"y"};
    auto g = make_graph({node("Dropout", {"x", "ratio", "training"}, outputs)},
                        {in("x", {3, 4}, 1), constant("ratio", Tensor::scalar<float>(0.0f)),
                         constant("training", Tensor::scalar<bool>(true))},
                        "y", 13, Decl::Full);
    GradientResult r;
    training_graph(*g, {"x"}, &r);
    ASSERT_EQ(r.nodes.size(), 1u);
    EXPECT_EQ(r.nodes[0].op_type, "Identity");
  }
}

// dX of a training Dropout with seed 5 and ratio 0.5 for dY, next to the mask it drew, with
// training_mode constant or fed.
void expect_dropout_scales_by_mask(bool fed_training, bool training) {
  Tensor x = random_tensor({4, 5}, -1, 1, 3), dy = random_tensor({4, 5}, -1, 1, 4);
  auto n =
      node("Dropout", {"x", "ratio", "training"}, {"y", "mask"}, {{"seed", Attribute::of_int(5)}});
  std::vector<Input> inputs = {{"x", x}, constant("ratio", Tensor::scalar<double>(0.5))};
  inputs.push_back({"training", Tensor::scalar<bool>(training), !fed_training});
  auto g = make_graph({n}, inputs, "y", 13, Decl::Full);
  auto train = training_graph(*g, {"x"});
  train->outputs.push_back({"mask", {}});
  std::vector<Tensor> feeds = feeds_of(inputs);
  feeds.push_back(dy);
  auto out = run_graph(train, feeds);
  int kept = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    bool keep = out[1].data<bool>()[i];
    kept += keep;
    double expect = training ? dy.item_as_double(i) * keep / (1 - 0.5) : dy.item_as_double(i);
    EXPECT_DOUBLE_EQ(out[0].item_as_double(i), expect) << "element " << i;
  }
  if (training) {
    EXPECT_TRUE(kept > 0 && kept < x.numel()) << "the mask drops some and keeps some";
  }
}

TEST(GradientCnn, DropoutTrainingScalesByMask) {
  expect_dropout_scales_by_mask(false, true);
  expect_dropout_scales_by_mask(true, true);
  expect_dropout_scales_by_mask(true, false);
}

TEST(GradientCnn, DropoutTrainingWithoutMaskFails) {
  auto g = make_graph({node("Dropout", {"x", "ratio", "training"}, {"y"})},
                      {in("x", {3, 4}, 1), constant("ratio", Tensor::scalar<double>(0.5)),
                       constant("training", Tensor::scalar<bool>(true))},
                      "y", 13, Decl::Full);
  try {
    build_gradient(*g, GradientSpec{{"x"}, "y"});
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("mask output"), std::string::npos) << e.what();
  }
}

// ---- Pad ----

DPRUN_GRADIENT_CASE(Pad, PadConstantMode) {
  // Opset 11+: pads (one negative: a crop) and the padding value as inputs.
  Input pads = constant("pads", Tensor::from_vector<int64_t>({6}, {0, 1, 2, 1, -1, 0}));
  check_all_ways({node("Pad", {"x", "pads", "value"}, {"y"})},
                 {in("x", {2, 3, 4}, 1), pads, in("value", {}, 2)}, "y", {"x", "value"});
  // Pads fed at run time.
  check_gradients({node("Pad", {"x", "pads"}, {"y"})},
                  {in("x", {2, 3}, 3), {"pads", Tensor::from_vector<int64_t>({4}, {1, 0, 2, 1})}},
                  "y", {"x"}, 13, Decl::None);
  // Opset 18: axes.
  check_gradients(
      {node("Pad", {"x", "pads", "", "axes"}, {"y"})},
      {in("x", {2, 3, 4}, 4), constant("pads", Tensor::from_vector<int64_t>({2}, {2, 1})),
       constant("axes", Tensor::from_vector<int64_t>({1}, {-1}))},
      "y", {"x"}, 18, Decl::Full);
  // Opsets 2-10: attributes.
  check_at(
      {node("Pad", {"x"}, {"y"},
            {{"pads", Attribute::of_ints({1, 0, 0, 2})}, {"value", Attribute::of_float(1.5f)}})},
      {in("x", {2, 3}, 5)}, "y", {"x"}, {2, 10});
}

// ---- Max, Min ----

void check_extremum(const char* op) {
  // Three inputs, two broadcast.
  check_all_ways({node(op, {"a", "b", "c"}, {"y"})},
                 {distinct("a", {2, 3}, 1), distinct("b", {3}, 2), distinct("c", {2, 1}, 3)}, "y",
                 {"a", "b", "c"});
  check_at({node(op, {"a", "b"}, {"y"})}, {distinct("a", {2, 3}, 4), distinct("b", {2, 3}, 5)}, "y",
           {"a", "b"}, {7, 8});
  check_at({node(op, {"a"}, {"y"})}, {distinct("a", {2, 3}, 6)}, "y", {"a"}, {12});
}

DPRUN_GRADIENT_CASE(Max, MaxInputs) {
  check_extremum("Max");
}
DPRUN_GRADIENT_CASE(Min, MinInputs) {
  check_extremum("Min");
}

TEST(GradientCnn, MaxMinSplitTiesEqually) {
  // As torch.maximum / torch.minimum: tied inputs share dY.
  Tensor a = Tensor::from_vector<double>({3}, {1, 2, 3}),
         b = Tensor::from_vector<double>({3}, {1, 1, 4});
  Tensor dy = Tensor::from_vector<double>({3}, {2, 2, 2});
  for (const char* op : {"Max", "Min"}) {
    SCOPED_TRACE(op);
    auto g = make_graph({node(op, {"a", "b"}, {"y"})}, {{"a", a}, {"b", b}}, "y", 17, Decl::Full);
    auto out = run_graph(training_graph(*g, {"a", "b"}), {a, b, dy});
    bool is_max = std::string(op) == "Max";
    expect_values(out[0], {3}, {1, is_max ? 2.0 : 0.0, is_max ? 0.0 : 2.0}, 0);
    expect_values(out[1], {3}, {1, is_max ? 0.0 : 2.0, is_max ? 2.0 : 0.0}, 0);
  }
}

// ---- a CNN block end to end ----

Tensor as_float32(const Tensor& t) {
  std::vector<float> v;
  for (int64_t i = 0; i < t.numel(); ++i) v.push_back(static_cast<float>(t.item_as_double(i)));
  return Tensor::from_vector<float>(t.shape(), v);
}

// The gradients of a Conv, training BatchNorm, Relu, MaxPool, Clip, AveragePool,
// GlobalAveragePool block with inputs of `dtype`, the forward graph typed by ONNX shape
// inference (a save and load), compiled as models are (channels-last rewrite included).
std::vector<Tensor> cnn_block_gradients(const std::vector<Input>& inputs64, const Tensor& dy64,
                                        DType dtype) {
  std::vector<Input> inputs = inputs64;
  Tensor dy = dy64;
  if (dtype == DType::Float32) {
    for (auto& input : inputs) input.value = as_float32(input.value);
    dy = as_float32(dy64);
  }
  std::vector<Node> nodes = {
      node("Conv", {"x", "w"}, {"c"}, {{"pads", Attribute::of_ints({1, 1, 1, 1})}}),
      node("BatchNormalization", {"c", "scale", "b", "mean", "var"}, {"n", "rm", "rv"},
           {{"training_mode", Attribute::of_int(1)}}),
      node("Relu", {"n"}, {"r"}),
      node("MaxPool", {"r"}, {"m"},
           {{"kernel_shape", Attribute::of_ints({3, 3})},
            {"strides", Attribute::of_ints({2, 2})},
            {"pads", Attribute::of_ints({1, 1, 1, 1})}}),
      node("Clip", {"m", "lo", "hi"}, {"k"}),
      node("AveragePool", {"k"}, {"a"}, {{"kernel_shape", Attribute::of_ints({2, 2})}}),
      node("GlobalAveragePool", {"a"}, {"y"})};
  auto forward = make_graph(nodes, inputs, "y", 15, Decl::Full);
  forward->initializers["lo"] =
      dtype == DType::Float32 ? Tensor::scalar<float>(0.0f) : Tensor::scalar<double>(0.0);
  forward->initializers["hi"] =
      dtype == DType::Float32 ? Tensor::scalar<float>(0.5f) : Tensor::scalar<double>(0.5);
  forward->outputs[0].type = {
      dtype, SymbolicShape{Dim::known(2), Dim::known(4), Dim::known(1), Dim::known(1)}};
  std::string path = ::testing::TempDir() + "cnn_block_" + std::to_string(::getpid()) + ".onnx";
  save_graph(*forward, forward->initializers, path);
  auto typed = load_graph(path);
  std::remove(path.c_str());
  GradientSpec spec{{"x", "w", "scale", "b"}, "y", "dY"};
  GradientResult r = build_gradient(*typed, spec);
  typed->inputs.push_back({"dY", {dtype, std::nullopt}});
  typed->nodes.insert(typed->nodes.end(), r.nodes.begin(), r.nodes.end());
  typed->outputs.clear();
  for (const auto& g : r.gradients) typed->outputs.push_back({g, {}});
  std::vector<Tensor> feeds = feeds_of(inputs);
  feeds.push_back(dy);
  return run_graph(typed, feeds);
}

TEST(GradientCnn, BlockWithSymbolicBatch) {
  // The CNN reference models' chain (Conv, training BatchNorm, Relu, MaxPool, Conv,
  // GlobalAveragePool) with a dynamic batch, as torch.onnx exports it. The graph carries no
  // inferred types, so the second Conv's X has no known shape and its rule reads the sizes at
  // run time.
  Input w1 = in("w1", {3, 2, 3, 3}, 2), w2 = in("w2", {2, 3, 3, 3}, 3);
  w1.constant = w2.constant = true;
  std::vector<Input> inputs = {in("x", {3, 2, 6, 6}, 1),
                               w1,
                               w2,
                               in("cb", {3}, 4),
                               in("scale", {3}, 5, 0.5, 2),
                               in("b", {3}, 6),
                               in("mean", {3}, 7),
                               in("var", {3}, 8, 0.5, 1)};
  std::vector<Node> nodes = {
      node("Conv", {"x", "w1", "cb"}, {"c"}, {{"pads", Attribute::of_ints({1, 1, 1, 1})}}),
      node("BatchNormalization", {"c", "scale", "b", "mean", "var"}, {"n", "rm", "rv"},
           {{"training_mode", Attribute::of_int(1)}}),
      node("Relu", {"n"}, {"r"}),
      node("MaxPool", {"r"}, {"m"},
           {{"kernel_shape", Attribute::of_ints({2, 2})}, {"strides", Attribute::of_ints({2, 2})}}),
      node("Conv", {"m", "w2"}, {"c2"}, {{"pads", Attribute::of_ints({1, 1, 1, 1})}}),
      node("GlobalAveragePool", {"c2"}, {"y"})};
  check_gradients(nodes, inputs, "y", {"x", "w1", "w2", "cb", "scale", "b"}, 15, Decl::Batch);
}

TEST(GradientCnn, Float32BlockMatchesFloat64) {
  // W an initializer: its Conv runs channels-last in float32.
  Input w = in("w", {4, 3, 3, 3}, 2);
  w.constant = true;
  std::vector<Input> inputs = {in("x", {2, 3, 8, 8}, 1),    w,
                               in("scale", {4}, 3, 0.5, 2), in("b", {4}, 4, -0.2, 0.4),
                               in("mean", {4}, 5),          in("var", {4}, 6, 0.5, 1)};
  Tensor dy = random_tensor({2, 4, 1, 1}, -1, 1, 7);
  auto g64 = cnn_block_gradients(inputs, dy, DType::Float64);
  auto g32 = cnn_block_gradients(inputs, dy, DType::Float32);
  ASSERT_EQ(g64.size(), 4u);
  for (size_t k = 0; k < g64.size(); ++k) {
    ASSERT_EQ(g32[k].dtype(), DType::Float32);
    double scale = 0;
    for (int64_t i = 0; i < g64[k].numel(); ++i)
      scale = std::max(scale, std::abs(g64[k].item_as_double(i)));
    EXPECT_GT(scale, 0) << "gradient " << k << " is all zeros";
    for (int64_t i = 0; i < g64[k].numel(); ++i)
      EXPECT_NEAR(g32[k].item_as_double(i), g64[k].item_as_double(i), 1e-3 * scale)
          << "gradient " << k << " element " << i;
  }
}

}  // namespace
}  // namespace dprun
