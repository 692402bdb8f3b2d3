// NchwConvMaxPoolNHWC (fuse_channels_last_ops, engine/backends/cpu/channels_last_fusion.h): a first
// convolution over an NCHW input of few channels and the max pool after it; which graphs fuse,
// results against the plain graph, and the kernel against the plain Conv and MaxPool kernels.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
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
using testing::random_floats;
const auto f32 = testing::float32_type;
const auto ints = testing::ints_attr;

/// x [2, C, 20, 20] -> Conv (W [16, C, k, k], bias, stride 2) -> Relu -> MaxPool 3x3 stride 2
/// -> a 1x1 Conv to 4 channels -> y, or with `pool` false the Relu's result straight into the
/// 1x1 Conv.
std::shared_ptr<Graph> stem_graph(int64_t channels, int64_t window, bool pool = true) {
  auto g = std::make_shared<Graph>();
  g->opset_imports[""] = 13;
  g->inputs.push_back({"x", f32({2, channels, 20, 20})});
  g->initializers["w"] = random_floats({16, channels, window, window}, 1);
  g->initializers["b"] = random_floats({16}, 2);
  g->initializers["w1"] = random_floats({4, 16, 1, 1}, 3);
  g->nodes = {named_node("Conv", {"x", "w", "b"}, {"c"}, {{"strides", ints({2, 2})}}),
              named_node("Relu", {"c"}, {"r"})};
  if (pool)
    g->nodes.push_back(named_node("MaxPool", {"r"}, {"p"},
                                  {{"kernel_shape", ints({3, 3})}, {"strides", ints({2, 2})}}));
  g->nodes.push_back(named_node("Conv", {pool ? "p" : "r", "w1"}, {"y"}));
  const int64_t conv_out = (20 - window) / 2 + 1;
  const int64_t out = pool ? (conv_out - 3) / 2 + 1 : conv_out;
  g->outputs.push_back({"y", f32({2, 4, out, out})});
  return g;
}

std::vector<std::string> expect_rewrite_keeps_results(const std::shared_ptr<Graph>& g,
                                                      int64_t channels) {
  return testing::expect_rewrite_keeps_results(g, {random_floats({2, channels, 20, 20}, 11)});
}

TEST(NchwConvPoolFusion, FirstConvolutionAndPoolBecomeOneNode) {
  auto g = stem_graph(3, 3);
  EXPECT_EQ(expect_rewrite_keeps_results(g, 3),
            (std::vector<std::string>{"NchwConvMaxPoolNHWC", "ConvNHWC", "Transpose"}));
  Model model(g, Device::cpu());
  const Node& fused = model.plan()->graph().nodes[0];
  EXPECT_EQ(fused.inputs, (std::vector<std::string>{"x", "w", "b"}));
  EXPECT_EQ(fused.attr_string("activation", ""), "Relu");
  EXPECT_EQ(fused.attr_ints("strides", {}), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(fused.attr_ints("pool:kernel_shape", {}), (std::vector<int64_t>{3, 3}));
  EXPECT_EQ(fused.attr_ints("pool:strides", {}), (std::vector<int64_t>{2, 2}));
  EXPECT_FALSE(fused.has_attr("kernel_shape"));
  EXPECT_EQ(model.plan()->graph().nodes[1].inputs[0], fused.outputs[0]);
}

TEST(NchwConvPoolFusion, OtherStemsStayApart) {
  // Five input channels; a 5x5 window; no pool after the convolution; the convolution's result
  // also a graph output.
  auto read_elsewhere = stem_graph(3, 3);
  read_elsewhere->outputs.push_back({"r", f32({2, 16, 9, 9})});
  const std::map<std::string, std::pair<std::shared_ptr<Graph>, int64_t>> cases = {
      {"five channels", {stem_graph(5, 3), 5}},
      {"5x5 window", {stem_graph(3, 5), 3}},
      {"no pool", {stem_graph(3, 3, false), 3}},
      {"conv read elsewhere", {read_elsewhere, 3}}};
  for (const auto& [name, graph_and_channels] : cases) {
    SCOPED_TRACE(name);
    const std::vector<std::string> ops =
        expect_rewrite_keeps_results(graph_and_channels.first, graph_and_channels.second);
    EXPECT_EQ(std::count(ops.begin(), ops.end(), "NchwConvMaxPoolNHWC"), 0);
    EXPECT_EQ(ops.front(), "Transpose");
  }
}

Node stem_node(const std::string& activation, bool bias) {
  return testing::fused_test_node("NchwConvMaxPoolNHWC", {"x", "w", bias ? "b" : ""}, {"y"},
                                  {{"pads", ints({1, 0, 1, 1})},
                                   {"strides", ints({2, 2})},
                                   {"pool:kernel_shape", ints({3, 3})},
                                   {"pool:strides", ints({2, 2})},
                                   {"pool:ceil_mode", Attribute::of_int(1)}},
                                  activation);
}

/// The plain NCHW Conv (reference kernel, no activation) of x, w and b.
Tensor plain_conv(const Tensor& x, const Tensor& w, const Tensor* b) {
  Node conv = named_node("Conv", {"x", "w"}, {"c"},
                         {{"pads", ints({1, 0, 1, 1})}, {"strides", ints({2, 2})}});
  std::vector<Tensor> in = {x, w};
  if (b) {
    conv.inputs.push_back("b");
    in.push_back(*b);
  }
  return testing::run_impl(conv, in, 13, "reference")[0];
}

/// activation(conv), max pooled 3x3 stride 2 with ceil_mode by the plain MaxPool's reference
/// kernel, transposed to NHWC.
Tensor pooled_nhwc(const Tensor& conv, const std::function<double(double)>& activation) {
  Tensor activated = Tensor::empty(conv.shape(), DType::Float32);
  for (int64_t i = 0; i < activated.numel(); ++i)
    activated.data<float>()[i] = static_cast<float>(activation(conv.data<float>()[i]));
  Node pool = named_node("MaxPool", {"a"}, {"p"},
                         {{"kernel_shape", ints({3, 3})},
                          {"strides", ints({2, 2})},
                          {"ceil_mode", Attribute::of_int(1)}});
  const Tensor p = testing::run_impl(pool, {activated}, 13, "reference")[0];
  const int64_t n = p.dim(0), c = p.dim(1), h = p.dim(2), w = p.dim(3);
  Tensor out = Tensor::empty({n, h, w, c}, DType::Float32);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t k = 0; k < c; ++k)
      for (int64_t y = 0; y < h; ++y)
        for (int64_t x = 0; x < w; ++x)
          out.data<float>()[((i * h + y) * w + x) * c + k] =
              p.data<float>()[((i * c + k) * h + y) * w + x];
  return out;
}

TEST(NchwConvPoolFusion, KernelMatchesConvolutionActivationPoolAndTranspose) {
  // x [N, 3, 23, 21], W [16, 3, 3, 3], pads (1, 0, 1, 1), stride 2: the convolution is
  // [N, 16, 12, 10], the pool (ceil_mode) [N, 16, 6, 5]. One image, three (tiles of one on two
  // threads, three in one tile on one) and four (two tiles of two on two threads).
  const auto references = testing::fused_activation_references(-0.1, 0.3);
  const auto identity = [](double v) { return v; };
  for (int64_t n : {1, 3, 4}) {
    const Tensor x = random_floats({n, 3, 23, 21}, 21), w = random_floats({16, 3, 3, 3}, 22),
                 b = random_floats({16}, 23);
    for (bool bias : {true, false}) {
      const Tensor conv = plain_conv(x, w, bias ? &b : nullptr);
      for (const auto& [kind, unused] : fused_activation_kinds()) {
        ASSERT_TRUE(kind.empty() || references.count(kind)) << "no reference for " << kind;
        const Tensor want = pooled_nhwc(conv, kind.empty() ? identity : references.at(kind));
        ASSERT_EQ(want.shape(), (Shape{n, 6, 5, 16}));
        for (const char* impl : {"reference", "onednn"})
          for (int threads : {1, 2}) {
            SCOPED_TRACE(kind + " on the " + impl + " path, batch " + std::to_string(n) + ", " +
                         std::to_string(threads) + " threads" + (bias ? "" : ", no bias"));
            std::vector<Tensor> in = {x, w};
            if (bias) in.push_back(b);
            const Tensor got = testing::run_impl(stem_node(kind, bias), in, 1, impl, threads)[0];
            ASSERT_EQ(got.shape(), want.shape());
            for (int64_t i = 0; i < want.numel(); ++i)
              ASSERT_NEAR(got.data<float>()[i], want.data<float>()[i], 1e-5) << "element " << i;
          }
      }
    }
  }
}

TEST(NchwConvPoolFusion, AnOmittedBiasIsNoBias) {
  const Tensor x = random_floats({2, 3, 23, 21}, 51), w = random_floats({16, 3, 3, 3}, 52);
  const Tensor want = pooled_nhwc(plain_conv(x, w, nullptr), [](double v) { return v; });
  Node n = stem_node("", false);
  n.inputs.pop_back();  // X and W only
  for (const char* impl : {"reference", "onednn"}) {
    SCOPED_TRACE(impl);
    const Tensor got = testing::run_impl(n, {x, w}, 1, impl)[0];
    ASSERT_EQ(got.shape(), want.shape());
    for (int64_t i = 0; i < want.numel(); ++i)
      ASSERT_NEAR(got.data<float>()[i], want.data<float>()[i], 1e-5) << "element " << i;
  }
}

TEST(NchwConvPoolFusion, Float64RunsThePartsInTurn) {
  const Tensor x = random_floats({2, 3, 23, 21}, 31), w = random_floats({16, 3, 3, 3}, 32),
               b = random_floats({16}, 33);
  const Tensor want = pooled_nhwc(plain_conv(x, w, &b), [](double v) { return v; });
  std::vector<Tensor> wide;
  for (const Tensor& t : {x, w, b}) {
    wide.push_back(Tensor::empty(t.shape(), DType::Float64));
    for (int64_t i = 0; i < t.numel(); ++i) wide.back().data<double>()[i] = t.data<float>()[i];
  }
  const Tensor got = testing::run_node(stem_node("", true), wide, 1, kRewriteDomain)[0];
  ASSERT_EQ(got.dtype(), DType::Float64);
  ASSERT_EQ(got.shape(), want.shape());
  for (int64_t i = 0; i < want.numel(); ++i)
    ASSERT_NEAR(got.data<double>()[i], want.data<float>()[i], 1e-5) << "element " << i;
}

TEST(NchwConvPoolFusion, KernelReportsWhatDoesNotFit) {
  Node n = stem_node("Relu", true);
  n.name = "stem";
  const std::vector<Tensor> in = {random_floats({1, 4, 23, 21}, 41),
                                  random_floats({16, 3, 3, 3}, 42), random_floats({16}, 43)};
  EXPECT_EQ(testing::run_node_error(n, in, 1, kRewriteDomain),
            "[NchwConvMaxPoolNHWC] node 'stem': [Conv] node 'stem': X [1, 4, 23, 21] and W "
            "[16, 3, 3, 3] do not agree for group=1");
  Node one_input = n;
  one_input.inputs = {"x"};
  EXPECT_EQ(testing::run_node_error(one_input, {in[0]}, 1, kRewriteDomain),
            "1 node has no cpu kernel: [NchwConvMaxPoolNHWC] node 'stem' ([NchwConvMaxPoolNHWC] "
            "node 'stem': expects X, W and an optional B, got 1 inputs)");
}

}  // namespace
}  // namespace dprun
