// The channels-last fusions that start from a Concat along channels (fuse_channels_last_ops,
// engine/backends/cpu/channels_last_fusion.h): pools moved before the Concat, ConcatConvNHWC, and
// the graphs they leave alone; results against the plain graph and the unfused channels-last graph.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>

#include "cpu_rewrite_test_util.h"
#include "engine/backends/cpu/layout_rewrite.h"
#include "engine/model.h"
#include "fused_activation_reference.h"
#include "graph_test_util.h"
#include "kernel_test_util.h"
#include "op_test_util.h"
#include "ops/math/fused_activation_kind.h"

namespace dprun {
namespace {

using testing::named_node;
using testing::op_types;
using testing::random_floats;
const auto f32 = testing::float32_type;
const auto ints = testing::ints_attr;

Node concat(std::vector<std::string> parts, const std::string& out) {
  return named_node("Concat", std::move(parts), {out}, {{"axis", Attribute::of_int(1)}});
}

/// A graph reading x [2, 8, 9, 9]: a 1x1 Conv with Relu to 4 channels ("s"), then two Convs of
/// it, 1x1 to 6 channels ("e1") and 3x3 (pads 1) to `wide` channels ("e3"), each with a Relu,
/// and a Concat of `parts` of them ("cat"), as in a SqueezeNet Fire module; `tail` nodes read
/// "cat" and write "y".
std::shared_ptr<Graph> fire_graph(int64_t wide, std::vector<Node> tail, const Shape& y_shape,
                                  std::vector<std::string> parts = {"e1", "e3"}) {
  auto g = std::make_shared<Graph>();
  g->opset_imports[""] = 13;
  g->inputs.push_back({"x", f32({2, 8, 9, 9})});
  g->initializers["ws"] = random_floats({4, 8, 1, 1}, 1);
  g->initializers["bs"] = random_floats({4}, 2);
  g->initializers["w1"] = random_floats({6, 4, 1, 1}, 3);
  g->initializers["b1"] = random_floats({6}, 4);
  g->initializers["w3"] = random_floats({wide, 4, 3, 3}, 5);
  g->nodes = {named_node("Conv", {"x", "ws", "bs"}, {"s0"}),
              named_node("Relu", {"s0"}, {"s"}),
              named_node("Conv", {"s", "w1", "b1"}, {"e1_0"}),
              named_node("Relu", {"e1_0"}, {"e1"}),
              named_node("Conv", {"s", "w3"}, {"e3_0"}, {{"pads", ints({1, 1, 1, 1})}}),
              named_node("Relu", {"e3_0"}, {"e3"}),
              concat(std::move(parts), "cat")};
  g->nodes.insert(g->nodes.end(), tail.begin(), tail.end());
  g->outputs.push_back({"y", f32(y_shape)});
  return g;
}

/// The Fire graph, then MaxPool (3x3, stride 2, ceil mode, as SqueezeNet's) and a 1x1 Conv to
/// `out` channels with a Relu.
std::shared_ptr<Graph> fire_pool_conv_graph(int64_t out) {
  std::vector<Node> tail = {named_node("MaxPool", {"cat"}, {"p"},
                                       {{"kernel_shape", ints({3, 3})},
                                        {"strides", ints({2, 2})},
                                        {"ceil_mode", Attribute::of_int(1)}}),
                            named_node("Conv", {"p", "wy", "by"}, {"y0"}),
                            named_node("Relu", {"y0"}, {"y"})};
  auto g = fire_graph(6, tail, {2, out, 4, 4});
  g->initializers["wy"] = random_floats({out, 12, 1, 1}, 6);
  g->initializers["by"] = random_floats({out}, 7);
  return g;
}

/// The rewritten graph's op types, after checking its results on x (see
/// testing::expect_rewrite_keeps_results).
std::vector<std::string> expect_rewrite_keeps_results(const std::shared_ptr<Graph>& g) {
  return testing::expect_rewrite_keeps_results(g, {random_floats({2, 8, 9, 9}, 11)});
}

TEST(ChannelConcatFusion, PoolMovesBeforeTheConcatAndTheConvolutionIsSplit) {
  auto g = fire_pool_conv_graph(5);
  EXPECT_EQ(
      expect_rewrite_keeps_results(g),
      (std::vector<std::string>{"Transpose", "ConvNHWC", "ConvNHWC", "ConvNHWC", "MaxPoolNHWC",
                                "MaxPoolNHWC", "ConcatConvNHWC", "Transpose"}));
  Model model(g, Device::cpu());
  const Node& split = model.plan()->graph().nodes[6];
  EXPECT_EQ(split.attr_string("activation", ""), "Relu");
  ASSERT_EQ(split.inputs.size(), 4u);  // W, B, then the two pooled parts
  EXPECT_EQ(split.inputs[0], "wy");
  EXPECT_EQ(split.inputs[1], "by");
  EXPECT_EQ(split.inputs[2], model.plan()->graph().nodes[4].outputs[0]);
  EXPECT_EQ(split.inputs[3], model.plan()->graph().nodes[5].outputs[0]);
}

TEST(ChannelConcatFusion, PooledPartsGiveTheSameBitsAsThePooledConcatenation) {
  // The pool is the graph's last node: its parts are joined by a Concat under its name.
  for (const char* pool : {"MaxPool", "AveragePool"}) {
    SCOPED_TRACE(pool);
    auto g = fire_graph(7,
                        {named_node(pool, {"cat"}, {"y"},
                                    {{"kernel_shape", ints({3, 3})},
                                     {"strides", ints({2, 2})},
                                     {"pads", ints({1, 1, 1, 1})},
                                     {"count_include_pad", Attribute::of_int(1)}})},
                        {2, 13, 5, 5});
    if (std::string(pool) == "MaxPool") g->nodes.back().attributes.erase("count_include_pad");
    EXPECT_EQ(expect_rewrite_keeps_results(g),
              (std::vector<std::string>{"Transpose", "ConvNHWC", "ConvNHWC", "ConvNHWC",
                                        std::string(pool) + "NHWC", std::string(pool) + "NHWC",
                                        "Concat", "Transpose"}));
    Model fused(g, Device::cpu());
    Model unfused(g, Device::cpu(), ModelOptions{.fuse_ops = false});
    EXPECT_EQ(op_types(unfused.plan()->graph()),
              (std::vector<std::string>{"Transpose", "ConvNHWC", "ConvNHWC", "ConvNHWC", "Concat",
                                        std::string(pool) + "NHWC", "Transpose"}));
    const Tensor x = random_floats({2, 8, 9, 9}, 12);
    const Tensor want = unfused.run({x})[0], got = fused.run({x})[0];
    ASSERT_EQ(got.shape(), (Shape{2, 13, 5, 5}));
    ASSERT_EQ(got.shape(), want.shape());
    EXPECT_EQ(std::memcmp(got.raw_data(), want.raw_data(), got.nbytes()), 0);
  }
}

TEST(ChannelConcatFusion, AnyWindowIsSplitWithoutBias) {
  // A 3x3 stride-2 Conv without bias, reading a Concat of three parts (6 + 7 + 6 channels, one
  // value twice), 3 outputs: (3 - 1) * 3 <= 19.
  auto g = fire_graph(7,
                      {named_node("Conv", {"cat", "wy"}, {"y"},
                                  {{"pads", ints({1, 0, 1, 2})}, {"strides", ints({2, 2})}})},
                      {2, 3, 5, 5}, {"e1", "e3", "e1"});
  g->initializers["wy"] = random_floats({3, 19, 3, 3}, 8);
  EXPECT_EQ(expect_rewrite_keeps_results(g),
            (std::vector<std::string>{"Transpose", "ConvNHWC", "ConvNHWC", "ConvNHWC",
                                      "ConcatConvNHWC", "Transpose"}));
  Model model(g, Device::cpu());
  const Node& split = model.plan()->graph().nodes[4];
  EXPECT_EQ(split.inputs.size(), 5u);
  EXPECT_EQ(split.inputs[1], "");
  EXPECT_EQ(split.inputs[2], split.inputs[4]);
}

TEST(ChannelConcatFusion, ConvolutionStaysWholeWhereSplittingMovesMoreBytes) {
  // 12 input channels in two parts: 12 outputs are split, 13 are not.
  for (int64_t out : {12, 13}) {
    SCOPED_TRACE(out);
    const std::vector<std::string> ops = expect_rewrite_keeps_results(fire_pool_conv_graph(out));
    EXPECT_EQ(std::count(ops.begin(), ops.end(), "ConcatConvNHWC"), out == 12 ? 1 : 0);
    EXPECT_EQ(std::count(ops.begin(), ops.end(), "Concat"), out == 12 ? 0 : 1);
    EXPECT_EQ(std::count(ops.begin(), ops.end(), "MaxPoolNHWC"), 2);
  }
}

TEST(ChannelConcatFusion, ConcatenationReadElsewhereIsKept) {
  // "cat" is a graph output too: neither the pool nor the Conv may take its place.
  auto g = fire_pool_conv_graph(5);
  g->outputs.push_back({"cat", f32({2, 12, 9, 9})});
  const std::vector<std::string> ops = expect_rewrite_keeps_results(g);
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "Concat"), 1);
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "MaxPoolNHWC"), 1);
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "ConcatConvNHWC"), 0);
  // Grouped convolutions are not split either.
  auto grouped = fire_pool_conv_graph(6);
  grouped->nodes[8].attributes["group"] = Attribute::of_int(2);
  grouped->initializers["wy"] = random_floats({6, 6, 1, 1}, 9);
  const std::vector<std::string> grouped_ops = expect_rewrite_keeps_results(grouped);
  EXPECT_EQ(std::count(grouped_ops.begin(), grouped_ops.end(), "ConcatConvNHWC"), 0);
}

Node concat_conv_node(const std::string& activation) {
  return testing::fused_test_node("ConcatConvNHWC", {"w", "b", "p0", "p1", "p2"}, {"y"},
                                  {{"pads", ints({1, 1, 0, 1})}, {"strides", ints({1, 2})}},
                                  activation);
}

/// Parts of 3, 5 and 8 channels at 2 x 11 x 10, weights [4, 16, 3, 2] and a bias.
std::vector<Tensor> concat_conv_inputs() {
  return {random_floats({4, 16, 3, 2}, 21), random_floats({4}, 22),
          random_floats({2, 11, 10, 3}, 23), random_floats({2, 11, 10, 5}, 24),
          random_floats({2, 11, 10, 8}, 25)};
}

/// ConvNHWC's reference kernel on the concatenation of the parts, built by hand.
Tensor conv_of_concatenation(const std::vector<Tensor>& in) {
  Tensor cat = Tensor::empty({2, 11, 10, 16}, DType::Float32);
  for (int64_t px = 0; px < 2 * 11 * 10; ++px) {
    int64_t c = 0;
    for (size_t p = 2; p < in.size(); ++p)
      for (int64_t k = 0; k < in[p].dim(3); ++k)
        cat.data<float>()[px * 16 + c++] = in[p].data<float>()[px * in[p].dim(3) + k];
  }
  Node conv = concat_conv_node("");
  conv.op_type = "ConvNHWC";
  conv.inputs = {"x", "w", "b"};
  return testing::run_impl(conv, {cat, in[0], in[1]}, 1, "reference")[0];
}

TEST(ChannelConcatFusion, KernelMatchesTheConvolutionOfTheConcatenation) {
  const std::vector<Tensor> in = concat_conv_inputs();
  const Tensor plain = conv_of_concatenation(in);
  ASSERT_EQ(plain.shape(), (Shape{2, 10, 6, 4}));
  // The reference path concatenates and runs ConvNHWC's reference: the same bits.
  const Tensor reference = testing::run_impl(concat_conv_node(""), in, 1, "reference")[0];
  ASSERT_EQ(reference.shape(), plain.shape());
  EXPECT_EQ(std::memcmp(reference.raw_data(), plain.raw_data(), plain.nbytes()), 0);
  // Each fused activation on both paths (the oneDNN one split into three convolutions, on two
  // threads), against the activation applied by hand to the plain convolution.
  const auto references = testing::fused_activation_references(-0.1, 0.3);
  for (const auto& [kind, unused] : fused_activation_kinds()) {
    ASSERT_TRUE(kind.empty() || references.count(kind)) << "no reference for " << kind;
    for (const char* impl : {"reference", "onednn"}) {
      SCOPED_TRACE(kind + " on the " + impl + " path");
      const Tensor got = testing::run_impl(concat_conv_node(kind), in, 1, impl, 2)[0];
      ASSERT_EQ(got.shape(), plain.shape());
      for (int64_t i = 0; i < plain.numel(); ++i) {
        const double v = plain.item_as_double(i);
        ASSERT_NEAR(got.item_as_double(i), kind.empty() ? v : references.at(kind)(v), 1e-5)
            << "element " << i;
      }
    }
  }
}

TEST(ChannelConcatFusion, KernelRunsOtherDtypesOnTheConcatenation) {
  std::vector<Tensor> in = concat_conv_inputs();
  const Tensor want = conv_of_concatenation(in);
  for (Tensor& t : in) {
    Tensor wide = Tensor::empty(t.shape(), DType::Float64);
    for (int64_t i = 0; i < t.numel(); ++i) wide.data<double>()[i] = t.data<float>()[i];
    t = wide;
  }
  const Tensor got = testing::run_node(concat_conv_node(""), in, 1, kRewriteDomain)[0];
  ASSERT_EQ(got.dtype(), DType::Float64);
  ASSERT_EQ(got.shape(), want.shape());
  for (int64_t i = 0; i < want.numel(); ++i)
    ASSERT_NEAR(got.item_as_double(i), want.item_as_double(i), 1e-5) << "element " << i;
}

/// The error of a ConcatConvNHWC node 'fire' (no bias) whose last part has `last_shape`.
std::string concat_conv_error(const Shape& last_shape) {
  Node n = concat_conv_node("");
  n.name = "fire";
  n.inputs[1] = "";
  std::vector<Tensor> in = concat_conv_inputs();
  in.erase(in.begin() + 1);
  in.back() = random_floats(last_shape, 26);
  return testing::run_node_error(n, in, 1, kRewriteDomain);
}

TEST(ChannelConcatFusion, KernelNamesPartsThatDoNotFit) {
  EXPECT_EQ(concat_conv_error({2, 11, 9, 8}),
            "[ConcatConvNHWC] node 'fire': part 2 float32[2, 11, 9, 8] on cpu:0 cannot be "
            "concatenated with float32[2, 11, 10, 3] on cpu:0 along channels");
  EXPECT_EQ(concat_conv_error({2, 11, 10, 7}),
            "[ConcatConvNHWC] node 'fire': the parts hold 15 channels in all; W float32[4, 16, 3, "
            "2] on cpu:0 in 1 group reads 16");
  EXPECT_EQ(concat_conv_error({2, 11, 10, 8}), "no error");
}

}  // namespace
}  // namespace dprun
