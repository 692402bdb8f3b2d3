// ConvAddNHWC (fuse_channels_last_ops, engine/backends/cpu/channels_last_fusion.h): a ConvNHWC
// whose result only an Add reads, with the activation after the Add; which graphs fuse, results
// against the plain graph, and the kernel against the convolution plus Z computed by hand.
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

/// A residual block on x [2, 6, 7, 7]: a 1x1 Conv with Relu to "r" (the block's input, in NHWC
/// as in a network), a 3x3 stride-1 MaxPool (pads 1) to "a" (not a convolution: a Conv there
/// would join a ConvChainNHWC), a 3x3 Conv (pads 1, no bias) to "c", then `tail` (which reads
/// "c" and "r" and writes "y").
std::shared_ptr<Graph> block_graph(std::vector<Node> tail, const Shape& y_shape) {
  auto g = std::make_shared<Graph>();
  g->opset_imports[""] = 13;
  g->inputs.push_back({"x", f32({2, 6, 7, 7})});
  g->initializers["w0"] = random_floats({6, 6, 1, 1}, 1);
  g->initializers["w2"] = random_floats({6, 6, 3, 3}, 4);
  const std::map<std::string, Attribute> pads = {{"pads", ints({1, 1, 1, 1})}};
  std::map<std::string, Attribute> pool = pads;
  pool["kernel_shape"] = ints({3, 3});
  g->nodes = {named_node("Conv", {"x", "w0"}, {"r0"}), named_node("Relu", {"r0"}, {"r"}),
              named_node("MaxPool", {"r"}, {"a"}, pool),
              named_node("Conv", {"a", "w2"}, {"c"}, pads)};
  g->nodes.insert(g->nodes.end(), tail.begin(), tail.end());
  g->outputs.push_back({"y", f32(y_shape)});
  return g;
}

/// The rewritten graph's op types, after checking its results on x (see
/// testing::expect_rewrite_keeps_results).
std::vector<std::string> expect_rewrite_keeps_results(const std::shared_ptr<Graph>& g) {
  return testing::expect_rewrite_keeps_results(g, {random_floats({2, 6, 7, 7}, 11)});
}

TEST(ConvAddFusion, ResidualAddAndReluJoinTheConvolution) {
  // Add(c, r) then Relu (ResNet), and Add(r, c) without an activation (MobileNetV2).
  for (bool relu : {true, false}) {
    SCOPED_TRACE(relu ? "Add(c, r), Relu" : "Add(r, c)");
    std::vector<Node> tail = {relu ? named_node("Add", {"c", "r"}, {"s"})
                                   : named_node("Add", {"r", "c"}, {"y"})};
    if (relu) tail.push_back(named_node("Relu", {"s"}, {"y"}));
    auto g = block_graph(tail, {2, 6, 7, 7});
    EXPECT_EQ(expect_rewrite_keeps_results(g),
              (std::vector<std::string>{"Transpose", "ConvNHWC", "MaxPoolNHWC", "ConvAddNHWC",
                                        "Transpose"}));
    Model model(g, Device::cpu());
    const Node& fused = model.plan()->graph().nodes[3];
    EXPECT_EQ(fused.attr_string("activation", ""), relu ? "Relu" : "");
    ASSERT_EQ(fused.inputs.size(), 4u);
    EXPECT_EQ(fused.inputs[1], "w2");
    EXPECT_EQ(fused.inputs[2], "");                                         // no bias
    EXPECT_EQ(fused.inputs[3], model.plan()->graph().nodes[1].outputs[0]);  // r in NHWC
  }
}

TEST(ConvAddFusion, AddendStillReadAfterwardsIsNotOverwritten) {
  // r is read by the fused node and then by a Mul: the sum must not be written over it.
  auto g = block_graph({named_node("Add", {"c", "r"}, {"s"}), named_node("Mul", {"s", "r"}, {"y"})},
                       {2, 6, 7, 7});
  const std::vector<std::string> ops = expect_rewrite_keeps_results(g);
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "ConvAddNHWC"), 1);
  // The addend is also a graph output.
  auto h = block_graph({named_node("Add", {"c", "r"}, {"y"})}, {2, 6, 7, 7});
  h->outputs.push_back({"r", f32({2, 6, 7, 7})});
  const std::vector<std::string> h_ops = expect_rewrite_keeps_results(h);
  EXPECT_EQ(std::count(h_ops.begin(), h_ops.end(), "ConvAddNHWC"), 1);
}

TEST(ConvAddFusion, BroadcastAddendRunsTheStepsInTurn) {
  // Z = GlobalAveragePool(r), [2, 1, 1, 6] in NHWC, broadcast over the convolution's pixels.
  auto g = block_graph({named_node("GlobalAveragePool", {"r"}, {"m"}),
                        named_node("Add", {"c", "m"}, {"s"}), named_node("Sigmoid", {"s"}, {"y"})},
                       {2, 6, 7, 7});
  const std::vector<std::string> ops = expect_rewrite_keeps_results(g);
  EXPECT_EQ(ops, (std::vector<std::string>{"Transpose", "ConvNHWC", "MaxPoolNHWC",
                                           "GlobalAveragePoolNHWC", "ConvAddNHWC", "Transpose"}));
}

TEST(ConvAddFusion, ConvolutionsThatKeepTheirAddAlone) {
  // A Conv with its own activation (the Relu comes before the Add), and one whose result is
  // also read elsewhere.
  auto activated = block_graph(
      {named_node("Relu", {"c"}, {"q"}), named_node("Add", {"q", "r"}, {"y"})}, {2, 6, 7, 7});
  auto shared = block_graph(
      {named_node("Add", {"c", "r"}, {"s"}), named_node("Mul", {"s", "c"}, {"y"})}, {2, 6, 7, 7});
  for (const auto& g : {activated, shared}) {
    const std::vector<std::string> ops = expect_rewrite_keeps_results(g);
    EXPECT_EQ(std::count(ops.begin(), ops.end(), "ConvAddNHWC"), 0);
    EXPECT_EQ(std::count(ops.begin(), ops.end(), "Add"), 1);
  }
}

Node conv_add_node(const std::string& activation) {
  return testing::fused_test_node(
      "ConvAddNHWC", {"x", "w", "b", "z"}, {"y"},
      {{"pads", ints({0, 1, 1, 0})}, {"strides", ints({2, 1})}, {"group", Attribute::of_int(2)}},
      activation);
}

TEST(ConvAddFusion, KernelMatchesTheConvolutionPlusTheAddend) {
  // Two groups, a 3x2 window, strides (2, 1), asymmetric pads: x [2, 9, 8, 4] gives y
  // [2, 4, 8, 6]; 384 outputs, on two threads.
  const std::vector<Tensor> in = {random_floats({2, 9, 8, 4}, 21), random_floats({6, 2, 3, 2}, 22),
                                  random_floats({6}, 23), random_floats({2, 4, 8, 6}, 24)};
  Node conv = conv_add_node("");
  conv.op_type = "ConvNHWC";
  conv.inputs.pop_back();
  conv.attributes.erase("activation");
  const Tensor plain = testing::run_impl(conv, {in[0], in[1], in[2]}, 1, "reference")[0];
  ASSERT_EQ(plain.shape(), (Shape{2, 4, 8, 6}));
  const auto references = testing::fused_activation_references(-0.1, 0.3);
  for (const auto& [kind, unused] : fused_activation_kinds()) {
    ASSERT_TRUE(kind.empty() || references.count(kind)) << "no reference for " << kind;
    for (const char* impl : {"reference", "onednn"}) {
      SCOPED_TRACE(kind + " on the " + impl + " path");
      const Tensor got = testing::run_impl(conv_add_node(kind), in, 1, impl, 2)[0];
      ASSERT_EQ(got.shape(), plain.shape());
      for (int64_t i = 0; i < plain.numel(); ++i) {
        const double v = plain.item_as_double(i) + in[3].item_as_double(i);
        ASSERT_NEAR(got.item_as_double(i), kind.empty() ? v : references.at(kind)(v), 1e-5)
            << "element " << i;
      }
    }
  }
}

TEST(ConvAddFusion, AllowWinogradLeavesTheConvolutionToConvNhwc) {
  // A 3x3 stride-1 convolution, 48 -> 48 channels at 30 x 30 (within ConvNHWC's Winograd
  // bound): with allow_winograd the fused node gives the bits of ConvNHWC's result plus Z.
  Node n = named_node("ConvAddNHWC", {"x", "w", "", "z"}, {"y"}, {{"pads", ints({1, 1, 1, 1})}});
  n.domain = kRewriteDomain;
  const std::vector<Tensor> in = {random_floats({1, 30, 30, 48}, 41),
                                  random_floats({48, 48, 3, 3}, 42),
                                  random_floats({1, 30, 30, 48}, 43)};
  const PlanOptions winograd{.allow_winograd = true};
  const Tensor got = testing::run_impl(n, in, 1, "onednn", 1, winograd)[0];
  Node conv = named_node("ConvNHWC", {"x", "w"}, {"c"}, {{"pads", ints({1, 1, 1, 1})}});
  conv.domain = kRewriteDomain;
  Tensor want = testing::run_impl(conv, {in[0], in[1]}, 1, "onednn", 1, winograd)[0];
  for (int64_t i = 0; i < want.numel(); ++i) want.data<float>()[i] += in[2].data<float>()[i];
  ASSERT_EQ(got.shape(), want.shape());
  EXPECT_EQ(std::memcmp(got.raw_data(), want.raw_data(), want.nbytes()), 0);
}

TEST(ConvAddFusion, KernelReportsAConvolutionThatDoesNotFit) {
  Node n = conv_add_node("Relu");
  n.name = "block";
  const std::vector<Tensor> in = {random_floats({2, 9, 8, 5}, 31), random_floats({6, 2, 3, 2}, 32),
                                  random_floats({6}, 33), random_floats({2, 4, 8, 6}, 34)};
  EXPECT_EQ(testing::run_node_error(n, in, 1, kRewriteDomain),
            "[ConvAddNHWC] node 'block': [Conv] node 'block': X [2, 5, 9, 8] and W [6, 2, 3, 2] "
            "do not agree for group=2");
}

}  // namespace
}  // namespace dprun
