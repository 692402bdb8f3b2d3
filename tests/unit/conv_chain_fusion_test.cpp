// ConvChainNHWC (fuse_channels_last_ops, engine/backends/cpu/channels_last_fusion.h): convolutions
// in a chain run a few images at a time; which graphs chain, results against the plain graph, and
// the kernel's tiles against the steps run in turn over the batch.
#include <gtest/gtest.h>

#include <cstring>
#include <map>

#include "cpu_rewrite_test_util.h"
#include "engine/backends/cpu/layout_rewrite.h"
#include "engine/model.h"
#include "graph_test_util.h"
#include "kernel_test_util.h"
#include "op_test_util.h"

namespace dprun {
namespace {

using testing::named_node;
using testing::op_types;
using testing::random_floats;
const auto f32 = testing::float32_type;
const auto ints = testing::ints_attr;

Node clip6(const std::string& in, const std::string& out) {
  Node n = named_node("Clip", {in}, {out});
  n.attributes["min"] = Attribute::of_float(0.f);
  n.attributes["max"] = Attribute::of_float(6.f);
  return n;
}

/// A MobileNetV2 inverted residual block on x [2, 4, 9, 9] (opset 6: Clip's bounds are
/// attributes): a 3x3 Conv with Relu to "r" (the block's input, read by the block and by the
/// Add), then a 1x1 expansion to 18 channels with Clip(0, 6), a 3x3 depthwise Conv (pads 1) with
/// Clip(0, 6), a 1x1 projection to 6 channels, and Add(projection, r).
std::shared_ptr<Graph> inverted_residual_graph() {
  auto g = std::make_shared<Graph>();
  g->opset_imports[""] = 6;
  g->inputs.push_back({"x", f32({2, 4, 9, 9})});
  g->initializers["ws"] = random_floats({6, 4, 3, 3}, 1);
  g->initializers["we"] = random_floats({18, 6, 1, 1}, 2);
  g->initializers["be"] = random_floats({18}, 3);
  g->initializers["wd"] = random_floats({18, 1, 3, 3}, 4);
  g->initializers["wp"] = random_floats({6, 18, 1, 1}, 5);
  g->initializers["bp"] = random_floats({6}, 6);
  g->nodes = {named_node("Conv", {"x", "ws"}, {"s"}, {{"pads", ints({1, 1, 1, 1})}}),
              named_node("Relu", {"s"}, {"r"}),
              named_node("Conv", {"r", "we", "be"}, {"e0"}),
              clip6("e0", "e"),
              named_node("Conv", {"e", "wd"}, {"d0"},
                         {{"pads", ints({1, 1, 1, 1})}, {"group", Attribute::of_int(18)}}),
              clip6("d0", "d"),
              named_node("Conv", {"d", "wp", "bp"}, {"p"}),
              named_node("Add", {"p", "r"}, {"y"})};
  g->outputs.push_back({"y", f32({2, 6, 9, 9})});
  return g;
}

TEST(ConvChainFusion, InvertedResidualBlockBecomesOneChain) {
  auto g = inverted_residual_graph();
  EXPECT_EQ(testing::expect_rewrite_keeps_results(g, {random_floats({2, 4, 9, 9}, 7)}),
            (std::vector<std::string>{"Transpose", "ConvNHWC", "ConvChainNHWC", "Transpose"}));
  Model model(g, Device::cpu());
  const Node& chain = model.plan()->graph().nodes[2];
  EXPECT_EQ(chain.attr_int("steps"), 3);
  EXPECT_EQ(chain.attr_int("sum"), 1);
  const std::string r = model.plan()->graph().nodes[1].outputs[0];
  EXPECT_EQ(chain.inputs, (std::vector<std::string>{r, "we", "be", "wd", "", "wp", "bp", r}));
  EXPECT_EQ(chain.attr_string("0:activation"), "Clip");
  EXPECT_EQ(chain.attr_int("1:group"), 18);
  EXPECT_EQ(chain.attr_string("1:activation"), "Clip");
  EXPECT_FALSE(chain.has_attr("2:activation"));
}

TEST(ConvChainFusion, ValuesReadElsewhereEndTheChain) {
  // The depthwise result is a graph output too: the expansion and the depthwise Conv chain, the
  // projection (a ConvAddNHWC) stays alone.
  auto g = inverted_residual_graph();
  g->outputs.push_back({"d", f32({2, 18, 9, 9})});
  EXPECT_EQ(testing::expect_rewrite_keeps_results(g, {random_floats({2, 4, 9, 9}, 8)}),
            (std::vector<std::string>{"Transpose", "ConvNHWC", "ConvChainNHWC", "Transpose",
                                      "ConvAddNHWC", "Transpose"}));
  // Read by a MaxPool as well: nothing chains after the stem.
  auto h = inverted_residual_graph();
  h->nodes.push_back(named_node("MaxPool", {"e"}, {"m"}, {{"kernel_shape", ints({2, 2})}}));
  h->outputs.push_back({"m", f32({2, 18, 8, 8})});
  const std::vector<std::string> ops =
      testing::expect_rewrite_keeps_results(h, {random_floats({2, 4, 9, 9}, 9)});
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "ConvChainNHWC"), 1);  // depthwise, projection
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "ConvNHWC"), 2);       // stem, expansion
}

/// A chain node of three steps on x [3, 40, 36, 8]: a 1x1 Conv to 64 channels with SiLU (a pass
/// after oneDNN), a 3x3 depthwise Conv with stride 2 and pads 1 with Relu, a 1x1 Conv to 5
/// channels, and with `sum` an addend of the output's shape [3, 20, 18, 5]. The expanded value
/// takes 369 kB an image, so the oneDNN path runs the chain an image at a time (three images
/// exceed its 1 MB tile).
Node chain_node(bool sum) {
  Node n = named_node("ConvChainNHWC", {"x", "w0", "b0", "w1", "", "w2", "b2"}, {"y"},
                      {{"steps", Attribute::of_int(3)},
                       {"sum", Attribute::of_int(sum ? 1 : 0)},
                       {"0:activation", Attribute::of_string("Swish")},
                       {"1:group", Attribute::of_int(64)},
                       {"1:pads", ints({1, 1, 1, 1})},
                       {"1:strides", ints({2, 2})},
                       {"1:activation", Attribute::of_string("Relu")}});
  n.domain = kRewriteDomain;
  if (sum) n.inputs.push_back("z");
  return n;
}

std::vector<Tensor> chain_inputs(bool sum) {
  std::vector<Tensor> in = {random_floats({3, 40, 36, 8}, 11), random_floats({64, 8, 1, 1}, 12),
                            random_floats({64}, 13),           random_floats({64, 1, 3, 3}, 14),
                            random_floats({5, 64, 1, 1}, 15),  random_floats({5}, 16)};
  if (sum) in.push_back(random_floats({3, 20, 18, 5}, 17));
  return in;
}

TEST(ConvChainFusion, KernelMatchesTheStepsInTurn) {
  for (bool sum : {false, true}) {
    SCOPED_TRACE(sum ? "with an addend" : "without an addend");
    const std::vector<Tensor> in = chain_inputs(sum);
    const Tensor want = testing::run_impl(chain_node(sum), in, 1, "reference")[0];
    ASSERT_EQ(want.shape(), (Shape{3, 20, 18, 5}));
    for (int threads : {1, 2}) {
      const Tensor got = testing::run_impl(chain_node(sum), in, 1, "onednn", threads)[0];
      ASSERT_EQ(got.shape(), want.shape());
      double scale = 1e-6;
      for (int64_t i = 0; i < want.numel(); ++i)
        scale = std::max(scale, std::abs(want.item_as_double(i)));
      for (int64_t i = 0; i < want.numel(); ++i)
        ASSERT_NEAR(got.item_as_double(i), want.item_as_double(i), 1e-5 * scale)
            << "element " << i << " on " << threads << " threads";
    }
  }
}

TEST(ConvChainFusion, AllowWinogradRunsTheStepsInTurn) {
  // Two 3x3 stride-1 steps, 48 -> 48 channels at 30 x 30 (19.9M multiply-adds an image, within
  // ConvNHWC's Winograd bound): with allow_winograd the chain gives the bits of its steps run in
  // turn by the oneDNN ConvNHWC kernels.
  Node n = named_node("ConvChainNHWC", {"x", "w0", "", "w1", ""}, {"y"},
                      {{"steps", Attribute::of_int(2)},
                       {"0:pads", ints({1, 1, 1, 1})},
                       {"0:activation", Attribute::of_string("Relu")},
                       {"1:pads", ints({1, 1, 1, 1})}});
  n.domain = kRewriteDomain;
  const std::vector<Tensor> in = {random_floats({1, 30, 30, 48}, 21),
                                  random_floats({48, 48, 3, 3}, 22),
                                  random_floats({48, 48, 3, 3}, 23)};
  const PlanOptions winograd{.allow_winograd = true};
  const Tensor chained = testing::run_impl(n, in, 1, "onednn", 1, winograd)[0];
  Node first =
      named_node("ConvNHWC", {"x", "w0"}, {"h"},
                 {{"pads", ints({1, 1, 1, 1})}, {"activation", Attribute::of_string("Relu")}});
  Node second = named_node("ConvNHWC", {"h", "w1"}, {"y"}, {{"pads", ints({1, 1, 1, 1})}});
  first.domain = second.domain = kRewriteDomain;
  const Tensor h = testing::run_impl(first, {in[0], in[1]}, 1, "onednn", 1, winograd)[0];
  const Tensor want = testing::run_impl(second, {h, in[2]}, 1, "onednn", 1, winograd)[0];
  ASSERT_EQ(chained.shape(), want.shape());
  EXPECT_EQ(std::memcmp(chained.raw_data(), want.raw_data(), want.nbytes()), 0);
}

TEST(ConvChainFusion, KernelNamesWhatDoesNotFit) {
  Node n = chain_node(false);
  n.name = "block";
  n.inputs.pop_back();
  std::vector<Tensor> in = chain_inputs(false);
  in.pop_back();
  EXPECT_EQ(testing::run_node_error(n, in, 1, kRewriteDomain),
            "1 node has no cpu kernel: [ConvChainNHWC] node 'block' ([ConvChainNHWC] node "
            "'block': expects X, a weight and a bias (or \"\") per step of 3, got 6 inputs)");
  in = chain_inputs(false);
  in[3] = random_floats({64, 2, 3, 3}, 18);  // a depthwise weight of 2 input channels
  EXPECT_EQ(testing::run_node_error(chain_node(false), in, 1, kRewriteDomain),
            "[ConvChainNHWC] node 'ConvChainNHWC_y': [Conv] node 'ConvChainNHWC_y': X [3, 64, 40, "
            "36] and W [64, 2, 3, 3] do not agree for group=64");
}

}  // namespace
}  // namespace dprun
