// The weight gradient of a Conv as one ConvWeightGrad node (engine/rewrites/op_fusion.h): which
// chains the CPU backend fuses, the fused kernel against the float64 gradient of the unfused
// graph (itself checked by finite differences in gradient_rules_test.cpp), and against the
// unfused chain where the shapes are not a convolution's.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "engine/rewrites/rewrite_domain.h"
#include "gradient_check.h"
#include "op_test_util.h"

namespace dprun {
namespace {

using namespace dprun::testing;

// Where a forward Conv's weight gradient goes: its attributes, X and W's shapes.
struct ConvCase {
  std::string name;
  std::map<std::string, Attribute> attrs;
  Shape x, w;
};

std::vector<ConvCase> conv_cases() {
  auto ints = [](std::vector<int64_t> v) { return Attribute::of_ints(std::move(v)); };
  return {
      {"3x3 stride 1, as a ResNet body",
       {{"pads", ints({1, 1, 1, 1})}},
       {2, 4, 7, 7},
       {5, 4, 3, 3}},
      {"3x3 stride 2 leaving a row unused",
       {{"pads", ints({1, 1, 1, 1})}, {"strides", ints({2, 2})}},
       {2, 3, 10, 10},
       {4, 3, 3, 3}},
      {"1x1 stride 2 leaving a row unused",
       {{"strides", ints({2, 2})}},
       {3, 4, 10, 9},
       {6, 4, 1, 1}},
      {"7x7 stride 2, as a stem",
       {{"pads", ints({3, 3, 3, 3})}, {"strides", ints({2, 2})}},
       {2, 3, 12, 12},
       {4, 3, 7, 7}},
      {"asymmetric pads, mixed strides and a dilation",
       {{"strides", ints({2, 1})}, {"pads", ints({1, 0, 0, 1})}, {"dilations", ints({1, 2})}},
       {2, 2, 6, 5},
       {3, 2, 3, 2}},
      {"1-D stride 3", {{"strides", ints({3})}, {"pads", ints({2, 0})}}, {2, 3, 11}, {4, 3, 2}},
      {"3-D stride 2", {{"strides", ints({2, 2, 2})}}, {2, 2, 5, 4, 5}, {3, 2, 2, 2, 2}},
      {"depthwise 3x3 stride 2, multiplier 2",
       {{"group", Attribute::of_int(3)}, {"pads", ints({1, 1, 1, 1})}, {"strides", ints({2, 2})}},
       {2, 3, 9, 9},
       {6, 1, 3, 3}},
      {"group 2, asymmetric pads, mixed strides and a dilation",
       {{"group", Attribute::of_int(2)},
        {"strides", ints({2, 1})},
        {"pads", ints({1, 0, 0, 1})},
        {"dilations", ints({1, 2})}},
       {2, 4, 6, 5},
       {6, 2, 3, 2}},
      {"1-D group 2 stride 3",
       {{"group", Attribute::of_int(2)}, {"strides", ints({3})}, {"pads", ints({2, 0})}},
       {2, 4, 11},
       {4, 2, 2}},
      {"3-D depthwise", {{"group", Attribute::of_int(2)}}, {2, 2, 4, 3, 4}, {2, 1, 2, 2, 2}},
  };
}

// The training graph of y = Conv(x, w) for dL/dw with L = sum(y * dY), in `dtype`.
std::shared_ptr<Graph> weight_gradient_graph(const ConvCase& c, DType dtype) {
  std::vector<Input> inputs = {in("x", c.x, 1), in("w", c.w, 2)};
  for (Input& input : inputs)
    if (dtype == DType::Float32) input.value = to_float32(input.value);
  auto forward =
      make_graph({node("Conv", {"x", "w"}, {"y"}, c.attrs)}, inputs, "y", 17, Decl::Full);
  auto g = std::make_shared<Graph>(*forward);
  GradientResult r = build_gradient(*forward, GradientSpec{{"w"}, "y", "dY"});
  g->inputs.push_back({"dY", {dtype, std::nullopt}});
  g->nodes.insert(g->nodes.end(), r.nodes.begin(), r.nodes.end());
  g->outputs = {{r.gradients[0], {}}};
  return g;
}

std::vector<Tensor> feeds(const ConvCase& c, const Tensor& y_shaped, DType dtype) {
  std::vector<Tensor> f = {in("x", c.x, 1).value, in("w", c.w, 2).value, y_shaped};
  if (dtype == DType::Float32)
    for (Tensor& t : f) t = to_float32(t);
  return f;
}

TEST(ConvWeightGrad, MatchesTheFloat64GradientOfEveryGeometry) {
  for (const ConvCase& c : conv_cases()) {
    SCOPED_TRACE(c.name);
    auto g64 = weight_gradient_graph(c, DType::Float64);
    const Tensor y =
        run_forward(make_graph({node("Conv", {"x", "w"}, {"y"}, c.attrs)},
                               {in("x", c.x, 1), in("w", c.w, 2)}, "y", 17, Decl::Full),
                    {in("x", c.x, 1).value, in("w", c.w, 2).value});
    const Tensor dy = random_tensor(y.shape(), -1, 1, 7);
    const Tensor want = Model(g64, Device::cpu()).run(feeds(c, dy, DType::Float64))[0];

    Model fused(weight_gradient_graph(c, DType::Float32), Device::cpu(),
                {.channels_last = false, .fuse_ops = true});
    const Graph& plan = *fused.plan()->graph_ptr();
    EXPECT_EQ(count_ops(plan, "ConvWeightGrad"), 1);
    EXPECT_EQ(count_ops(plan, "Transpose"), 0);
    EXPECT_EQ(count_ops(plan, "Slice"), 0);
    EXPECT_EQ(count_ops(plan, "Reshape"), 0);  // a group's regrouping went with the chain
    EXPECT_EQ(count_ops(plan, "Squeeze") + count_ops(plan, "Unsqueeze"), 0);
    const Tensor got = fused.run(feeds(c, dy, DType::Float32))[0];
    ASSERT_EQ(got.shape(), c.w);
    double scale = 0;
    for (int64_t i = 0; i < want.numel(); ++i)
      scale = std::max(scale, std::abs(want.item_as_double(i)));
    for (int64_t i = 0; i < want.numel(); ++i)
      ASSERT_NEAR(got.item_as_double(i), want.item_as_double(i), 1e-5 * scale) << "element " << i;
  }
}

// The chain as conv_grad.cpp writes it, of X [n, c, xs...] and dY [n, m, ys...], by hand, so
// that dY need not be the convolution's output.
std::shared_ptr<Graph> weight_gradient_chain(const Shape& x, const Shape& dy,
                                             const std::vector<int64_t>& kernel,
                                             const std::vector<int64_t>& strides,
                                             const std::vector<int64_t>& pads) {
  auto g = std::make_shared<Graph>();
  g->opset_imports[""] = 17;
  auto declared = [](const Shape& s) {
    SymbolicShape d;
    for (int64_t v : s) d.push_back(Dim::known(v));
    return TensorType{DType::Float32, d};
  };
  g->inputs = {{"x", declared(x)}, {"dy", declared(dy)}};
  std::vector<int64_t> perm = {1, 0}, axes;
  for (size_t i = 2; i < x.size(); ++i) {
    perm.push_back(static_cast<int64_t>(i));
    axes.push_back(static_cast<int64_t>(i));
  }
  const auto swap = Attribute::of_ints(perm);
  g->initializers["starts"] = Tensor::from_vector<int64_t>({static_cast<int64_t>(axes.size())},
                                                           std::vector<int64_t>(axes.size(), 0));
  g->initializers["ends"] =
      Tensor::from_vector<int64_t>({static_cast<int64_t>(kernel.size())}, kernel);
  g->initializers["axes"] = Tensor::from_vector<int64_t>({static_cast<int64_t>(axes.size())}, axes);
  g->nodes = {
      node("Transpose", {"x"}, {"xt"}, {{"perm", swap}}),
      node("Transpose", {"dy"}, {"dyt"}, {{"perm", swap}}),
      node("Conv", {"xt", "dyt"}, {"full"},
           {{"dilations", Attribute::of_ints(strides)}, {"pads", Attribute::of_ints(pads)}}),
      node("Slice", {"full", "starts", "ends", "axes"}, {"cropped"}),
      node("Transpose", {"cropped"}, {"dw"}, {{"perm", swap}})};
  for (size_t i = 0; i < g->nodes.size(); ++i) g->nodes[i].name = "n" + std::to_string(i);
  g->outputs = {{"dw", {}}};
  return g;
}

// Runs `g` on (x, dy) with and without the fusion; expects one ConvWeightGrad node and equal
// results.
void expect_fused_equals_chain(const std::shared_ptr<Graph>& g, const Shape& x, const Shape& dy,
                               const Shape& want_shape) {
  const std::vector<Tensor> in = {to_float32(random_tensor(x, -1, 1, 3)),
                                  to_float32(random_tensor(dy, -1, 1, 4))};
  Model chain(g, Device::cpu(), {.channels_last = false, .fuse_ops = false});
  Model fused(g, Device::cpu(), {.channels_last = false, .fuse_ops = true});
  EXPECT_EQ(count_ops(*fused.plan()->graph_ptr(), "ConvWeightGrad"), 1);
  const Tensor want = chain.run(in)[0];
  const Tensor got = fused.run(in)[0];
  ASSERT_EQ(want.shape(), want_shape);
  ASSERT_EQ(got.shape(), want_shape);
  for (int64_t i = 0; i < want.numel(); ++i)
    ASSERT_NEAR(got.item_as_double(i), want.item_as_double(i),
                1e-5 * (1 + std::abs(want.item_as_double(i))))
        << "element " << i;
}

TEST(ConvWeightGrad, ComputesTheChainWhereDyIsNoConvolutionOutput) {
  // X 9 with kernel 3 at stride 2 gives 4 rows; a dY of 3 rows is no convolution's output.
  expect_fused_equals_chain(
      weight_gradient_chain({2, 3, 9, 9}, {2, 4, 3, 4}, {3, 3}, {2, 2}, {0, 0, 0, 0}), {2, 3, 9, 9},
      {2, 4, 3, 4}, {4, 3, 3, 3});
  // dY's 3 rows at stride 2 span 5 of X's 5: the Conv form has 1 row, not the kernel's 3.
  expect_fused_equals_chain(
      weight_gradient_chain({1, 2, 5, 6}, {1, 3, 3, 2}, {3, 3}, {2, 2}, {0, 0, 0, 0}), {1, 2, 5, 6},
      {1, 3, 3, 2}, {3, 2, 1, 3});
}

TEST(ConvWeightGrad, FusesOnlyTheChainItComputes) {
  const Shape x = {2, 3, 9, 9}, dy = {2, 4, 4, 4};
  auto fused_count = [](const std::shared_ptr<Graph>& g) {
    Model m(g, Device::cpu(), {.channels_last = false, .fuse_ops = true});
    return count_ops(*m.plan()->graph_ptr(), "ConvWeightGrad");
  };
  auto chain = [&] { return weight_gradient_chain(x, dy, {3, 3}, {2, 2}, {0, 0, 0, 0}); };
  EXPECT_EQ(fused_count(chain()), 1);

  auto g = chain();
  g->inputs[0].type.dtype = DType::Undefined;  // X's element type unknown: dY's tells
  EXPECT_EQ(fused_count(g), 1);
  g->inputs[1].type.dtype = DType::Undefined;  // neither known
  EXPECT_EQ(fused_count(g), 0);
  g = chain();
  g->initializers["starts"] = Tensor::from_vector<int64_t>({2}, {1, 0});
  EXPECT_EQ(fused_count(g), 0);
  g = chain();
  g->nodes[4].attributes["perm"] = Attribute::of_ints({0, 1, 3, 2});
  EXPECT_EQ(fused_count(g), 0);
  g = chain();
  g->nodes[2].attributes["group"] = Attribute::of_int(2);
  EXPECT_EQ(fused_count(g), 0);
  g = chain();
  g->outputs.push_back({"full", {}});  // the uncropped product is a result too
  EXPECT_EQ(fused_count(g), 0);

  // A swapped operand read elsewhere too stays, and the fused node reads X itself.
  g = chain();
  g->outputs.push_back({"xt", {}});
  Model m(g, Device::cpu(), {.channels_last = false, .fuse_ops = true});
  const Graph& plan = *m.plan()->graph_ptr();
  EXPECT_EQ(count_ops(plan, "ConvWeightGrad"), 1);
  EXPECT_EQ(count_ops(plan, "Transpose"), 1);
  EXPECT_EQ(count_ops(plan, "Conv"), 0);
}

Node weight_grad_node() {
  Node n = make_node("ConvWeightGrad", {"x", "dy"}, {"dw"});
  n.domain = kRewriteDomain;
  n.name = "dw";
  n.attributes["kernel_shape"] = Attribute::of_ints({3, 3});
  n.attributes["strides"] = Attribute::of_ints({1, 1});
  n.attributes["pads"] = Attribute::of_ints({1, 1, 1, 1});
  return n;
}

// Channels [begin, begin + count) of `t` [N, C, ...].
Tensor channels(const Tensor& t, int64_t begin, int64_t count) {
  Shape shape = t.shape();
  const int64_t inner = t.numel() / (shape[0] * shape[1]);
  shape[1] = count;
  std::vector<float> v;
  for (int64_t n = 0; n < t.dim(0); ++n)
    for (int64_t i = (n * t.dim(1) + begin) * inner; i < (n * t.dim(1) + begin + count) * inner;
         ++i)
      v.push_back(t.data<float>()[i]);
  return Tensor::from_vector<float>(shape, v);
}

TEST(ConvWeightGrad, AGroupIsTheGroupOneGradientOfItsChannels) {
  // X 9 with kernel 3 at stride 2 gives 4 rows; a dY of 3 rows is no convolution's output (the
  // direct sum); dY of 4 rows is (oneDNN's grouped weights). Group 2: C 4, M 6.
  for (int64_t rows : {3, 4}) {
    SCOPED_TRACE(std::to_string(rows) + " rows of dY");
    const Tensor x = to_float32(random_tensor({2, 4, 9, 9}, -1, 1, 3));
    const Tensor dy = to_float32(random_tensor({2, 6, rows, 4}, -1, 1, 4));
    Node n = weight_grad_node();
    n.attributes["strides"] = Attribute::of_ints({2, 2});
    n.attributes["pads"] = Attribute::of_ints({0, 0, 0, 0});
    n.attributes["group"] = Attribute::of_int(2);
    const Tensor grouped = run_node(n, {x, dy}, 1, kRewriteDomain)[0];
    ASSERT_EQ(grouped.shape(), (Shape{6, 2, 3, 3}));
    n.attributes.erase("group");
    for (int64_t g = 0; g < 2; ++g) {
      const Tensor want =
          run_node(n, {channels(x, 2 * g, 2), channels(dy, 3 * g, 3)}, 1, kRewriteDomain)[0];
      for (int64_t i = 0; i < want.numel(); ++i)
        ASSERT_NEAR(grouped.data<float>()[g * want.numel() + i], want.data<float>()[i],
                    1e-5 * (1 + std::abs(want.data<float>()[i])))
            << "group " << g << " element " << i;
    }
  }
}

TEST(ConvWeightGrad, FusesOnlyTheGroupedChainItComputes) {
  const ConvCase c = conv_cases()[8];  // group 2
  auto fused_count = [](const std::shared_ptr<Graph>& g) {
    Model m(g, Device::cpu(), {.channels_last = false, .fuse_ops = true});
    return count_ops(*m.plan()->graph_ptr(), "ConvWeightGrad");
  };
  EXPECT_EQ(fused_count(weight_gradient_graph(c, DType::Float32)), 1);
  // The Conv's group disagrees with the regrouping's.
  auto g = weight_gradient_graph(c, DType::Float32);
  for (Node& n : g->nodes)
    if (n.op_type == "Conv" && n.attr_int("group", 1) == 2 && n.inputs[0] != "x")
      n.attributes["group"] = Attribute::of_int(4);
  EXPECT_EQ(fused_count(g), 0);
  // A regrouped operand read elsewhere too stays, and the fused node reads X itself.
  g = weight_gradient_graph(c, DType::Float32);
  for (const Node& n : g->nodes)
    if (n.op_type == "Squeeze") g->outputs.push_back({n.outputs[0], {}});
  Model m(g, Device::cpu(), {.channels_last = false, .fuse_ops = true});
  const Graph& plan = *m.plan()->graph_ptr();
  EXPECT_EQ(count_ops(plan, "ConvWeightGrad"), 1);
  EXPECT_EQ(count_ops(plan, "Squeeze"), 1);
  EXPECT_EQ(count_ops(plan, "Reshape"), 2);
}

TEST(ConvWeightGrad, AnEmptyBatchGivesZeros) {
  const Tensor x = Tensor::zeros({0, 2, 4, 4}, DType::Float32);
  const Tensor dy = Tensor::zeros({0, 3, 4, 4}, DType::Float32);
  const Tensor dw = run_node(weight_grad_node(), {x, dy}, 1, kRewriteDomain)[0];
  ASSERT_EQ(dw.shape(), (Shape{3, 2, 3, 3}));
  for (int64_t i = 0; i < dw.numel(); ++i) ASSERT_EQ(dw.data<float>()[i], 0.f);
}

TEST(ConvWeightGrad, NamesWhatDoesNotFit) {
  const Tensor x = to_float32(random_tensor({1, 2, 4, 4}, -1, 1, 1));
  EXPECT_EQ(run_node_error(weight_grad_node(), {x, random_tensor({1, 3, 4, 4}, -1, 1, 2)}, 1,
                           kRewriteDomain),
            "[ConvWeightGrad] node 'dw': X and dY must be float32, got float32 and float64");
  EXPECT_EQ(run_node_error(weight_grad_node(), {x, to_float32(random_tensor({1, 3, 16}, -1, 1, 2))},
                           1, kRewriteDomain),
            "[ConvWeightGrad] node 'dw': X [1, 2, 4, 4] and dY [1, 3, 16] must have rank 4 for "
            "kernel_shape [3, 3] and one batch size");
  EXPECT_EQ(
      run_node_error(weight_grad_node(), {x, to_float32(random_tensor({1, 3, 7, 4}, -1, 1, 2))}, 1,
                     kRewriteDomain),
      "[ConvWeightGrad] node 'dw': dY [1, 3, 7, 4] spans 7 rows of axis 2 at stride 1, more "
      "than the 6 of padded X");
}

}  // namespace
}  // namespace dprun
