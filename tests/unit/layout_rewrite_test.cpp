// The channels-last rewrite (engine/backends/cpu/layout_rewrite.h) and its NHWC kernels: the
// rewritten graph's structure, and equal results with and without the rewrite.
#include "engine/backends/cpu/layout_rewrite.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>

#include "engine/model.h"
#include "engine/parallel/replicate.h"
#include "fused_activation_reference.h"
#include "kernel_test_util.h"
#include "loader/onnx_loader.h"
#include "op_test_util.h"
#include "ops/math/fused_activation_kind.h"

namespace dprun {
namespace {

Tensor random_tensor(Shape shape, uint32_t seed) {
  Tensor t = Tensor::empty(std::move(shape), DType::Float32);
  uint32_t s = seed * 2654435761u + 12345u;
  for (int64_t i = 0; i < t.numel(); ++i) {
    s = s * 1664525u + 1013904223u;
    t.data<float>()[i] = static_cast<float>((s >> 8) % 2001) / 1000.0f - 1.0f;
  }
  return t;
}

TensorType f32(const Shape& shape) {
  TensorType t{DType::Float32, SymbolicShape{}};
  for (int64_t d : shape) t.shape->push_back(Dim::known(d));
  return t;
}

Attribute ints(std::vector<int64_t> v) {
  Attribute a;
  a.kind = Attribute::Kind::Ints;
  a.ints = std::move(v);
  return a;
}
Node node(std::string op, std::vector<std::string> in, std::vector<std::string> out,
          std::map<std::string, Attribute> attrs = {}) {
  Node n;
  n.name = op + "_" + out[0];
  n.op_type = std::move(op);
  n.inputs = std::move(in);
  n.outputs = std::move(out);
  n.attributes = std::move(attrs);
  return n;
}

/// Runs `graph` with and without the rewrite and compares every output.
void expect_same_results(const std::shared_ptr<const Graph>& graph,
                         const std::vector<Tensor>& inputs) {
  ASSERT_NE(rewrite_channels_last(*graph), nullptr) << "nothing was rewritten";
  Model plain(graph, Device::cpu(), ModelOptions{.channels_last = false});
  Model nhwc(graph, Device::cpu(), ModelOptions{.channels_last = true});
  EXPECT_EQ(&nhwc.graph(), graph.get());  // the model keeps presenting the original graph
  EXPECT_NE(nhwc.plan()->graph_ptr(), graph);
  EXPECT_EQ(nhwc.output_names(), plain.output_names());
  auto want = plain.run(inputs);
  auto got = nhwc.run(inputs);
  ASSERT_EQ(got.size(), want.size());
  for (size_t o = 0; o < want.size(); ++o) {
    ASSERT_EQ(got[o].shape(), want[o].shape()) << "output " << o;
    double scale = 1e-6;
    for (int64_t i = 0; i < want[o].numel(); ++i)
      scale = std::max(scale, std::abs(want[o].item_as_double(i)));
    for (int64_t i = 0; i < want[o].numel(); ++i)
      ASSERT_NEAR(got[o].item_as_double(i), want[o].item_as_double(i), 1e-5 * scale)
          << "output " << o << " element " << i;
  }
}

// Conv -> Relu -> Conv -> Add(residual) -> GlobalAveragePool -> Flatten -> Gemm.
std::shared_ptr<Graph> residual_graph() {
  auto g = std::make_shared<Graph>();
  g->opset_imports[""] = 13;
  g->inputs = {{"x", f32({2, 4, 8, 8})}};
  g->initializers["w1"] = random_tensor({4, 4, 3, 3}, 1);
  g->initializers["b1"] = random_tensor({4}, 2);
  g->initializers["w2"] = random_tensor({4, 4, 3, 3}, 3);
  g->initializers["wg"] = random_tensor({4, 3}, 4);
  auto pads = ints({1, 1, 1, 1});
  g->nodes = {node("Conv", {"x", "w1", "b1"}, {"c1"}, {{"pads", pads}}),
              node("Relu", {"c1"}, {"r1"}),
              node("Conv", {"r1", "w2"}, {"c2"}, {{"pads", pads}}),
              node("Add", {"c2", "r1"}, {"a"}),
              node("GlobalAveragePool", {"a"}, {"p"}),
              node("Flatten", {"p"}, {"f"}),
              node("Gemm", {"f", "wg"}, {"y"})};
  for (const char* v : {"c1", "r1", "c2", "a"}) g->value_types[v] = f32({2, 4, 8, 8});
  g->outputs = {{"y", f32({2, 3})}};
  return g;
}

TEST(LayoutRewrite, ResidualChainStaysChannelsLast) {
  auto g = residual_graph();
  auto r = rewrite_channels_last(*g);
  ASSERT_NE(r, nullptr);
  std::vector<std::string> ops;
  for (const Node& n : r->nodes) ops.push_back(n.op_type);
  // The Relu after the first Conv is fused into it.
  EXPECT_EQ(ops,
            (std::vector<std::string>{"Transpose", "ConvNHWC", "ConvNHWC", "Add",
                                      "GlobalAveragePoolNHWC", "Transpose", "Flatten", "Gemm"}));
  EXPECT_EQ(r->nodes[0].attr_ints("perm"), (std::vector<int64_t>{0, 2, 3, 1}));
  EXPECT_EQ(r->nodes[5].attr_ints("perm"), (std::vector<int64_t>{0, 3, 1, 2}));
  EXPECT_EQ(r->nodes[1].domain, kRewriteDomain);
  EXPECT_EQ(r->nodes[1].attr_string("activation", ""), "Relu");
  EXPECT_EQ(r->nodes[2].attr_string("activation", ""), "");
  EXPECT_EQ(r->opset("dprun"), 1);
  // The Transpose back restores the original name Flatten reads.
  EXPECT_EQ(r->nodes[5].outputs[0], "p");
  EXPECT_EQ(r->nodes[6].inputs[0], "p");
  for (const Node& n : r->nodes)
    for (const auto& out : n.outputs)
      if (out != "p" && out != "f" && out != "y") {
        EXPECT_EQ(out.rfind("nhwc/", 0), 0u) << out;
      }
  EXPECT_EQ(r->initializers.size(), g->initializers.size());
  EXPECT_EQ(r->outputs[0].name, "y");
  // Nothing to do without a convolution.
  Graph plain;
  plain.opset_imports[""] = 13;
  plain.inputs = {{"x", f32({1, 2, 3, 3})}};
  plain.nodes = {node("Relu", {"x"}, {"y"})};
  plain.outputs = {{"y", f32({1, 2, 3, 3})}};
  EXPECT_EQ(rewrite_channels_last(plain), nullptr);
}

TEST(LayoutRewrite, ModelsPresentTheOriginalGraph) {
  auto g = residual_graph();
  Model m(g, Device::cpu(0));
  EXPECT_EQ(m.graph_ptr(), g);
  EXPECT_NE(m.plan()->graph_ptr(), g);
  EXPECT_EQ(m.parameter_names(), (std::vector<std::string>{"b1", "w1", "w2", "wg"}));
  for (const auto& replica : replicate(m, {Device::cpu(0), Device::cpu(1)})) {
    EXPECT_EQ(replica->graph_ptr(), g);
    EXPECT_EQ(replica->plan(), m.plan());
  }
  Model off(g, Device::cpu(0), ModelOptions{.channels_last = false});
  EXPECT_EQ(off.plan()->graph_ptr(), g);
  ::setenv("DPRUN_NO_LAYOUT_REWRITE", "1", 1);
  Model env_off(g, Device::cpu(0));
  ::unsetenv("DPRUN_NO_LAYOUT_REWRITE");
  EXPECT_EQ(env_off.plan()->graph_ptr(), g);
}

TEST(LayoutRewrite, ResidualChainSameResults) {
  expect_same_results(residual_graph(), {random_tensor({2, 4, 8, 8}, 9)});
}

TEST(LayoutRewrite, UnknownShapesStillChannelsLast) {
  // Two NHWC operands are both 4-D: their broadcasting commutes with the layout, so shape
  // information is not needed.
  auto g = residual_graph();
  g->value_types.clear();
  auto r = rewrite_channels_last(*g);
  ASSERT_NE(r, nullptr);
  int transposes = 0;
  for (const Node& n : r->nodes) transposes += n.op_type == "Transpose";
  EXPECT_EQ(transposes, 2);
  expect_same_results(g, {random_tensor({2, 4, 8, 8}, 10)});
}

TEST(LayoutRewrite, AddOfAnNchwOperandStaysNchw) {
  auto g = residual_graph();
  g->initializers["shift"] = random_tensor({4, 1, 1}, 5);
  g->nodes[3].inputs[1] = "shift";  // c2 + shift, broadcast over a 3-D operand
  auto r = rewrite_channels_last(*g);
  ASSERT_NE(r, nullptr);
  int transposes = 0;
  for (const Node& n : r->nodes) {
    transposes += n.op_type == "Transpose";
    if (n.op_type == "Add") {
      EXPECT_EQ(n.inputs, (std::vector<std::string>{"c2", "shift"}));
    }
    EXPECT_NE(n.op_type, "GlobalAveragePoolNHWC");  // its input is NCHW
  }
  EXPECT_EQ(transposes, 2);  // x in, c2 out
  expect_same_results(g, {random_tensor({2, 4, 8, 8}, 10)});
}

// Grouped and depthwise convs with strides, pads and dilations; pools with ceil_mode;
// Concat axis 1; a Conv output that is a graph output and is read in both layouts; a
// squeeze-and-excitation block (a broadcasting Mul of two NHWC values).
std::shared_ptr<Graph> mixed_graph() {
  auto g = std::make_shared<Graph>();
  g->opset_imports[""] = 13;
  g->inputs = {{"x", f32({2, 6, 11, 13})}};
  g->initializers["wg"] = random_tensor({6, 2, 3, 3}, 11);
  g->initializers["bg"] = random_tensor({6}, 12);
  g->initializers["wd"] = random_tensor({6, 1, 3, 3}, 13);
  g->initializers["w1"] = random_tensor({5, 12, 1, 1}, 14);
  g->initializers["wse"] = random_tensor({6, 6, 1, 1}, 16);
  g->initializers["lo"] = Tensor::scalar(-0.25f);
  g->initializers["hi"] = Tensor::scalar(0.5f);
  g->nodes = {
      node("Conv", {"x", "wg", "bg"}, {"c1"},
           {{"group", Attribute::of_int(3)},
            {"strides", ints({2, 1})},
            {"pads", ints({1, 0, 2, 1})},
            {"dilations", ints({1, 2})}}),
      node("Relu", {"c1"}, {"r"}),
      node("Neg", {"c1"}, {"n"}),
      node("Conv", {"r", "wd"}, {"c2"},
           {{"group", Attribute::of_int(6)},
            {"auto_pad", Attribute{.kind = Attribute::Kind::String, .s = "SAME_UPPER"}}}),
      node("GlobalAveragePool", {"c2"}, {"gp"}),
      node("Conv", {"gp", "wse"}, {"se"}),
      node("HardSigmoid", {"se"}, {"hs"}),
      node("Mul", {"c2", "hs"}, {"sc"}),
      node("Clip", {"sc", "lo", "hi"}, {"k"}),
      node("Concat", {"k", "r"}, {"cat"}, {{"axis", Attribute::of_int(1)}}),
      node("MaxPool", {"cat"}, {"mp"},
           {{"kernel_shape", ints({3, 3})},
            {"strides", ints({2, 2})},
            {"ceil_mode", Attribute::of_int(1)}}),
      node("AveragePool", {"cat"}, {"ap"},
           {{"kernel_shape", ints({2, 3})},
            {"strides", ints({2, 2})},
            {"pads", ints({0, 1, 1, 1})},
            {"count_include_pad", Attribute::of_int(1)},
            {"ceil_mode", Attribute::of_int(1)}}),
      node("Conv", {"ap", "w1"}, {"c3"}),
      node("Sigmoid", {"c3"}, {"s"}),
      node("Concat", {"s", "s"}, {"cc"}, {{"axis", Attribute::of_int(-3)}}),
  };
  g->outputs = {{"c1", f32({})}, {"n", f32({})}, {"mp", f32({})}, {"cc", f32({})}};
  for (auto& o : g->outputs) o.type.shape.reset();
  return g;
}

TEST(LayoutRewrite, GroupedDepthwisePoolsConcatSameResults) {
  auto g = mixed_graph();
  auto r = rewrite_channels_last(*g);
  ASSERT_NE(r, nullptr);
  int nhwc_ops = 0;
  for (const Node& n : r->nodes) {
    nhwc_ops += n.domain == kRewriteDomain;
    if (n.op_type == "Concat") {
      EXPECT_EQ(n.attr_int("axis"), 3);
    }
    if (n.op_type == "Neg") {
      EXPECT_EQ(n.inputs[0], "c1");
    }
  }
  EXPECT_EQ(nhwc_ops, 7);  // four convs, three pools
  int transposes = 0;
  for (const Node& n : r->nodes) transposes += n.op_type == "Transpose";
  EXPECT_EQ(transposes, 4);  // x in; c1 (output and Neg), mp and cc out
  expect_same_results(g, {random_tensor({2, 6, 11, 13}, 15)});
}

TEST(LayoutRewrite, OtherDtypesRunThroughTheReference) {
  // A float64 Conv is not rewritten; a ConvNHWC node run directly in float64 uses the
  // reference between transposes.
  auto g = std::make_shared<Graph>();
  g->opset_imports[""] = 13;
  g->opset_imports[kRewriteDomain] = 1;
  g->inputs = {{"x", TensorType{DType::Float64, std::nullopt}}};
  Tensor w = Tensor::empty({3, 2, 2, 2}, DType::Float64);
  for (int64_t i = 0; i < w.numel(); ++i) w.data<double>()[i] = 0.1 * static_cast<double>(i % 7);
  g->initializers["w"] = w;
  Node conv = node("ConvNHWC", {"x", "w"}, {"y"}, {{"strides", ints({1, 2})}});
  conv.domain = kRewriteDomain;
  g->nodes = {conv};
  g->outputs = {{"y", TensorType{DType::Float64, std::nullopt}}};
  Tensor x = Tensor::empty({1, 3, 4, 2}, DType::Float64);  // NHWC, C = 2
  for (int64_t i = 0; i < x.numel(); ++i) x.data<double>()[i] = static_cast<double>(i);
  Model m(g, Device::cpu(), ModelOptions{.channels_last = false});
  Tensor y = m.run(std::vector<Tensor>{x})[0];
  ASSERT_EQ(y.shape(), (Shape{1, 2, 2, 3}));  // NHWC [N, OH, OW, M]
  // y[0, oh, ow, m] = sum_c,kh,kw x[0, oh+kh, 2*ow+kw, c] * w[m, c, kh, kw]
  for (int64_t oh = 0; oh < 2; ++oh)
    for (int64_t ow = 0; ow < 2; ++ow)
      for (int64_t mm = 0; mm < 3; ++mm) {
        double want = 0;
        for (int64_t c = 0; c < 2; ++c)
          for (int64_t kh = 0; kh < 2; ++kh)
            for (int64_t kw = 0; kw < 2; ++kw)
              want += x.data<double>()[((oh + kh) * 4 + (2 * ow + kw)) * 2 + c] *
                      w.data<double>()[((mm * 2 + c) * 2 + kh) * 2 + kw];
        EXPECT_NEAR(y.data<double>()[(oh * 2 + ow) * 3 + mm], want, 1e-12);
      }
}

// Conv -> BatchNormalization (inference) -> Relu -> output, plus a training-mode BN that must
// stay NCHW.
// Initializers scale, bias, mean and var of `channels` values (var in [0.5, 2.5)), from
// random_tensor seeds `seed` .. seed + 3.
void add_batch_norm_parameters(Graph& g, int64_t channels, uint32_t seed) {
  Tensor var = random_tensor({channels}, seed);
  for (int64_t i = 0; i < channels; ++i) var.data<float>()[i] = 1.5f + var.data<float>()[i];
  g.initializers["scale"] = random_tensor({channels}, seed + 1);
  g.initializers["bias"] = random_tensor({channels}, seed + 2);
  g.initializers["mean"] = random_tensor({channels}, seed + 3);
  g.initializers["var"] = var;
}

std::shared_ptr<Graph> batch_norm_graph(bool training) {
  auto g = std::make_shared<Graph>();
  g->opset_imports[""] = 15;
  g->inputs.push_back({"x", f32({2, 3, 6, 6})});
  g->initializers["w"] = random_tensor({5, 3, 3, 3}, 31);
  add_batch_norm_parameters(*g, 5, 32);
  std::map<std::string, Attribute> attrs = {{"epsilon", Attribute{}}};
  attrs["epsilon"].kind = Attribute::Kind::Float;
  attrs["epsilon"].f = 1e-3f;
  if (training) attrs["training_mode"] = Attribute::of_int(1);
  g->nodes = {node("Conv", {"x", "w"}, {"c"}, {{"pads", ints({1, 1, 1, 1})}}),
              node("BatchNormalization", {"c", "scale", "bias", "mean", "var"}, {"b"}, attrs),
              node("Relu", {"b"}, {"y"})};
  g->outputs.push_back({"y", f32({2, 5, 6, 6})});
  return g;
}

// Conv -> Clip(Constant bounds) -> output, and a Conv whose output Relu and Neg both read.
std::shared_ptr<Graph> activation_graph() {
  auto g = std::make_shared<Graph>();
  g->opset_imports[""] = 13;
  g->inputs.push_back({"x", f32({2, 3, 7, 7})});
  g->initializers["w"] = random_tensor({4, 3, 3, 3}, 41);
  g->initializers["w2"] = random_tensor({4, 4, 1, 1}, 42);
  Node lo = node("Constant", {}, {"lo"});
  lo.attributes["value"].kind = Attribute::Kind::Tensor;
  lo.attributes["value"].t = Tensor::scalar<float>(-0.25f);
  Node hi = node("Constant", {}, {"hi"});
  hi.attributes["value"].kind = Attribute::Kind::Tensor;
  hi.attributes["value"].t = Tensor::scalar<float>(0.5f);
  g->nodes = {lo,
              hi,
              node("Conv", {"x", "w"}, {"c"}, {{"strides", ints({2, 2})}}),
              node("Clip", {"c", "lo", "hi"}, {"clipped"}),
              node("Conv", {"clipped", "w2"}, {"c2"}),
              node("Relu", {"c2"}, {"r"}),
              node("Neg", {"c2"}, {"n"})};
  g->outputs = {{"r", f32({2, 4, 3, 3})}, {"n", f32({2, 4, 3, 3})}};
  return g;
}

TEST(LayoutRewrite, ConvAbsorbsItsOnlyActivation) {
  auto r = rewrite_channels_last(*activation_graph());
  ASSERT_NE(r, nullptr);
  int clips = 0, relus = 0, fused = 0;
  for (const Node& n : r->nodes) {
    clips += n.op_type == "Clip";
    relus += n.op_type == "Relu";
    if (n.op_type == "ConvNHWC" && n.attr_string("activation", "") == "Clip") {
      ++fused;
      EXPECT_EQ(n.attr_float("activation_min"), -0.25f);
      EXPECT_EQ(n.attr_float("activation_max"), 0.5f);
    }
  }
  EXPECT_EQ(clips, 0);
  EXPECT_EQ(fused, 1);
  EXPECT_EQ(relus, 1);  // c2 has two readers: its Relu stays a node
  expect_same_results(activation_graph(), {random_tensor({2, 3, 7, 7}, 43)});
}

TEST(LayoutRewrite, FusedActivationsOnBothPaths) {
  // Each fused activation, on the reference ConvNHWC (used for shapes oneDNN rejects and other
  // dtypes) and on the oneDNN path (a post-op, or a pass after the primitive for Swish),
  // equals the activation applied by hand to the plain convolution's output. The output has
  // 18432 elements: more than one task of the pass after the primitive.
  const auto references = testing::fused_activation_references(-0.1, 0.3);
  auto conv_node = [](const std::string& kind) {
    Node conv = node("ConvNHWC", {"x", "w"}, {"y"}, {{"pads", ints({1, 1, 1, 1})}});
    conv.domain = kRewriteDomain;
    if (kind.empty()) return conv;
    conv.attributes["activation"] = Attribute::of_string(kind);
    conv.attributes["activation_min"] = Attribute::of_float(-0.1f);
    conv.attributes["activation_max"] = Attribute::of_float(0.3f);
    return conv;
  };
  std::vector<Tensor> inputs = {random_tensor({2, 48, 48, 3}, 45), random_tensor({4, 3, 3, 3}, 46)};
  const Tensor plain = testing::run_impl(conv_node(""), inputs, 13, "reference")[0];
  ASSERT_EQ(plain.shape(), (Shape{2, 48, 48, 4}));
  for (const auto& [kind, unused] : fused_activation_kinds()) {
    if (kind.empty()) continue;
    ASSERT_EQ(references.count(kind), 1u) << "no reference for the fused activation " << kind;
    const auto& f = references.at(kind);
    for (const char* impl : {"reference", "onednn"}) {
      SCOPED_TRACE(kind + " on the " + impl + " path");
      const Tensor got = testing::run_impl(conv_node(kind), inputs, 13, impl)[0];
      ASSERT_EQ(got.shape(), plain.shape());
      for (int64_t i = 0; i < plain.numel(); ++i)
        ASSERT_NEAR(got.item_as_double(i), f(plain.item_as_double(i)), 1e-5) << "element " << i;
    }
  }
}

/// Whether this CPU has what oneDNN's avx512_core kernels (its Winograd among them) need.
bool cpu_has_avx512_core() {
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
}

TEST(LayoutRewrite, WinogradConvolutionOnlyWhenAllowedAndWithinItsBound) {
  // A 3x3 stride-1 ConvNHWC (odd spatial sizes: partial Winograd tiles; 12M multiply-adds per
  // image) with a Relu post-op. With allow_winograd it stays within 1e-5 of the largest output
  // of the reference kernel and, on a CPU with oneDNN's Winograd, differs from the direct path
  // (it ran); a stride-2 convolution and one below the size where Winograd pays ignore the
  // option bit for bit.
  auto conv = [](int64_t stride) {
    Node n = node("ConvNHWC", {"x", "w", "b"}, {"y"},
                  {{"pads", ints({1, 1, 1, 1})}, {"strides", ints({stride, stride})}});
    n.domain = kRewriteDomain;
    n.attributes["activation"] = Attribute::of_string("Relu");
    return n;
  };
  const std::vector<Tensor> inputs = {random_tensor({2, 29, 31, 32}, 47),
                                      random_tensor({48, 32, 3, 3}, 48), random_tensor({48}, 49)};
  const PlanOptions winograd{.allow_winograd = true};
  const Tensor reference = testing::run_impl(conv(1), inputs, 13, "reference")[0];
  const Tensor direct = testing::run_impl(conv(1), inputs, 13, "onednn")[0];
  const Tensor fast = testing::run_impl(conv(1), inputs, 13, "onednn", 1, winograd)[0];
  ASSERT_EQ(fast.shape(), reference.shape());
  double scale = 0, worst = 0;
  for (int64_t i = 0; i < reference.numel(); ++i)
    scale = std::max(scale, std::fabs(reference.item_as_double(i)));
  for (int64_t i = 0; i < reference.numel(); ++i)
    worst = std::max(worst, std::fabs(fast.item_as_double(i) - reference.item_as_double(i)));
  EXPECT_LE(worst, 1e-5 * scale);
  if (cpu_has_avx512_core()) {
    EXPECT_NE(std::memcmp(fast.raw_data(), direct.raw_data(), direct.nbytes()), 0);
  }
  const Tensor strided = testing::run_impl(conv(2), inputs, 13, "onednn")[0];
  const Tensor strided_allowed = testing::run_impl(conv(2), inputs, 13, "onednn", 1, winograd)[0];
  ASSERT_EQ(strided_allowed.shape(), strided.shape());
  EXPECT_EQ(std::memcmp(strided_allowed.raw_data(), strided.raw_data(), strided.nbytes()), 0);
  const std::vector<Tensor> small = {random_tensor({1, 8, 8, 4}, 50),
                                     random_tensor({4, 4, 3, 3}, 51), random_tensor({4}, 52)};
  const Tensor small_direct = testing::run_impl(conv(1), small, 13, "onednn")[0];
  const Tensor small_allowed = testing::run_impl(conv(1), small, 13, "onednn", 1, winograd)[0];
  ASSERT_EQ(small_allowed.shape(), small_direct.shape());
  EXPECT_EQ(std::memcmp(small_allowed.raw_data(), small_direct.raw_data(), small_direct.nbytes()),
            0);
}

std::vector<std::string> op_types(const Graph& g) {
  std::vector<std::string> ops;
  for (const Node& n : g.nodes) ops.push_back(n.op_type);
  return ops;
}

// Conv -> Sigmoid -> Mul(c1, s) (SiLU) -> Conv -> Sigmoid -> output; a third Conv's SiLU whose
// Sigmoid is also an output, which therefore stays.
std::shared_ptr<Graph> sigmoid_graph() {
  auto g = std::make_shared<Graph>();
  g->opset_imports[""] = 13;
  g->inputs.push_back({"x", f32({2, 3, 6, 6})});
  g->initializers["w1"] = random_tensor({4, 3, 3, 3}, 51);
  g->initializers["w2"] = random_tensor({4, 4, 1, 1}, 52);
  g->initializers["w3"] = random_tensor({4, 4, 1, 1}, 53);
  g->nodes = {node("Conv", {"x", "w1"}, {"c1"}, {{"pads", ints({1, 1, 1, 1})}}),
              node("Sigmoid", {"c1"}, {"s1"}),
              node("Mul", {"s1", "c1"}, {"silu"}),
              node("Conv", {"silu", "w2"}, {"c2"}),
              node("Sigmoid", {"c2"}, {"y"}),
              node("Conv", {"silu", "w3"}, {"c3"}),
              node("Sigmoid", {"c3"}, {"s3"}),
              node("Mul", {"c3", "s3"}, {"z"})};
  g->outputs = {{"y", f32({2, 4, 6, 6})}, {"z", f32({2, 4, 6, 6})}, {"s3", f32({2, 4, 6, 6})}};
  return g;
}

TEST(LayoutRewrite, ConvAbsorbsSigmoidAndSilu) {
  auto r = rewrite_channels_last(*sigmoid_graph());
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(op_types(*r),
            (std::vector<std::string>{"Transpose", "ConvNHWC", "ConvNHWC", "Transpose", "ConvNHWC",
                                      "Sigmoid", "Transpose", "Mul", "Transpose"}));
  EXPECT_EQ(r->nodes[1].attr_string("activation", ""), "Swish");
  EXPECT_EQ(r->nodes[1].outputs[0], "nhwc/silu");
  EXPECT_EQ(r->nodes[2].attr_string("activation", ""), "Sigmoid");
  EXPECT_EQ(r->nodes[3].outputs[0], "y");
  EXPECT_EQ(r->nodes[4].attr_string("activation", ""), "");  // s3 is an output: no fusion
  expect_same_results(sigmoid_graph(), {random_tensor({2, 3, 6, 6}, 54)});
}

// Conv -> Pad -> AveragePool -> output, with the pads as a Constant input (opset 13) or as an
// attribute (opset 2); a Pad of nothing before a second pool.
std::shared_ptr<Graph> pad_graph(int64_t opset, const std::string& mode) {
  auto g = std::make_shared<Graph>();
  g->opset_imports[""] = opset;
  g->inputs.push_back({"x", f32({2, 3, 6, 7})});
  g->initializers["w"] = random_tensor({4, 3, 3, 3}, 61);
  const std::vector<int64_t> pads = {0, 0, 1, 2, 0, 0, 2, 1};  // H and W, begin and end
  const std::vector<int64_t> none(8, 0);
  auto pad = [&](const std::string& in, const std::vector<int64_t>& amounts,
                 const std::string& out) {
    Node n = node("Pad", {in}, {out}, {{"mode", Attribute::of_string(mode)}});
    if (opset < 11) {
      n.attributes["pads"] = ints(amounts);
      return std::vector<Node>{n};
    }
    Node c = node("Constant", {}, {out + "_pads"});
    c.attributes["value"] = Attribute::of_tensor(Tensor::from_vector<int64_t>({8}, amounts));
    n.inputs.push_back(out + "_pads");
    return std::vector<Node>{c, n};
  };
  g->nodes = {node("Conv", {"x", "w"}, {"c"})};
  for (const Node& n : pad("c", pads, "p")) g->nodes.push_back(n);
  for (const Node& n : pad("c", none, "q")) g->nodes.push_back(n);
  g->nodes.push_back(node("AveragePool", {"p"}, {"y"}, {{"kernel_shape", ints({2, 2})}}));
  g->nodes.push_back(node("MaxPool", {"q"}, {"z"}, {{"kernel_shape", ints({2, 2})}}));
  g->outputs = {{"y", f32({2, 4, 6, 7})}, {"z", f32({2, 4, 3, 4})}};
  return g;
}

TEST(LayoutRewrite, PadJoinsTheChainWithItsPadsReordered) {
  for (int64_t opset : {2, 13})
    for (const char* mode : {"constant", "reflect", "edge"}) {
      SCOPED_TRACE("opset " + std::to_string(opset) + ", " + mode);
      auto r = rewrite_channels_last(*pad_graph(opset, mode));
      ASSERT_NE(r, nullptr);
      const std::vector<int64_t> nhwc_pads = {0, 1, 2, 0, 0, 2, 1, 0};
      int pads_checked = 0, identities = 0, transposes = 0;
      for (const Node& n : r->nodes) {
        transposes += n.op_type == "Transpose";
        identities += n.op_type == "Identity";
        if (n.op_type == "Pad" && opset < 11) {
          EXPECT_EQ(n.attr_ints("pads"), nhwc_pads);
          ++pads_checked;
        }
        if (n.op_type == "Constant" && n.outputs[0].rfind("nhwc/", 0) == 0) {
          const Tensor& t = n.find_attr("value")->t;
          EXPECT_EQ(std::vector<int64_t>(t.data<int64_t>(), t.data<int64_t>() + 8), nhwc_pads);
          ++pads_checked;
        }
      }
      EXPECT_EQ(pads_checked, 1);
      EXPECT_EQ(identities, 1);  // the Pad of nothing
      EXPECT_EQ(transposes, 3);  // x in; y and z out
      expect_same_results(pad_graph(opset, mode), {random_tensor({2, 3, 6, 7}, 62)});
    }
}

TEST(LayoutRewrite, InferenceBatchNormJoinsTheChain) {
  auto r = rewrite_channels_last(*batch_norm_graph(false));
  ASSERT_NE(r, nullptr);
  std::vector<std::string> ops;
  for (const Node& n : r->nodes) ops.push_back(n.op_type);
  // The Relu is the BatchNormalization's only reader: applied by it.
  EXPECT_EQ(ops, (std::vector<std::string>{"Transpose", "ConvNHWC", "BatchNormalizationNHWC",
                                           "Transpose"}));
  EXPECT_EQ(r->nodes[2].attr_string("activation", ""), "Relu");
  expect_same_results(batch_norm_graph(false), {random_tensor({2, 3, 6, 6}, 36)});
}

// Two Convs concatenated along channels (4 + 5), then BatchNormalization, Relu and a Conv, as in
// a DenseNet layer. `cat_is_output` makes the concatenation a graph output too.
std::shared_ptr<Graph> concat_norm_graph(bool cat_is_output) {
  auto g = std::make_shared<Graph>();
  g->opset_imports[""] = 15;
  g->inputs.push_back({"x", f32({2, 3, 5, 6})});
  g->initializers["w1"] = random_tensor({4, 3, 1, 1}, 81);
  g->initializers["w2"] = random_tensor({5, 3, 3, 3}, 82);
  g->initializers["w3"] = random_tensor({2, 9, 1, 1}, 83);
  add_batch_norm_parameters(*g, 9, 84);
  g->nodes = {node("Conv", {"x", "w1"}, {"c1"}),
              node("Conv", {"x", "w2"}, {"c2"}, {{"pads", ints({1, 1, 1, 1})}}),
              node("Concat", {"c1", "c2"}, {"cat"}, {{"axis", Attribute::of_int(1)}}),
              node("BatchNormalization", {"cat", "scale", "bias", "mean", "var"}, {"b"}),
              node("Relu", {"b"}, {"r"}),
              node("Conv", {"r", "w3"}, {"y"})};
  g->outputs.push_back({"y", f32({2, 2, 5, 6})});
  if (cat_is_output) g->outputs.push_back({"cat", f32({2, 9, 5, 6})});
  return g;
}

TEST(LayoutRewrite, ConcatThenBatchNormBecomesOneNode) {
  auto g = concat_norm_graph(false);
  Model fused(g, Device::cpu());
  EXPECT_EQ(op_types(fused.plan()->graph()),
            (std::vector<std::string>{"Transpose", "ConvNHWC", "ConvNHWC",
                                      "ConcatBatchNormalizationNHWC", "ConvNHWC", "Transpose"}));
  const Node& norm = fused.plan()->graph().nodes[3];
  EXPECT_EQ(norm.attr_string("activation", ""), "Relu");
  EXPECT_EQ(norm.inputs.size(), 6u);  // scale, bias, mean, var, then the two parts
  // The same bits as the unfused Concat and BatchNormalizationNHWC, and the plain graph's
  // results within float rounding.
  Model unfused(g, Device::cpu(), ModelOptions{.fuse_ops = false});
  const std::vector<std::string> unfused_ops = op_types(unfused.plan()->graph());
  EXPECT_EQ(std::count(unfused_ops.begin(), unfused_ops.end(), "BatchNormalizationNHWC"), 1);
  const Tensor x = random_tensor({2, 3, 5, 6}, 88);
  const Tensor want = unfused.run({x})[0], got = fused.run({x})[0];
  ASSERT_EQ(got.shape(), want.shape());
  EXPECT_EQ(std::memcmp(got.raw_data(), want.raw_data(), got.nbytes()), 0);
  expect_same_results(g, {x});
}

TEST(LayoutRewrite, AConcatReadElsewhereKeepsItsOwnNode) {
  Model model(concat_norm_graph(true), Device::cpu());
  const std::vector<std::string> ops = op_types(model.plan()->graph());
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "ConcatBatchNormalizationNHWC"), 0);
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "Concat"), 1);
  expect_same_results(concat_norm_graph(true), {random_tensor({2, 3, 5, 6}, 89)});
}

// The error a ConcatBatchNormalizationNHWC node 'dense1' gives for parameters of 5 values and
// the second part of `second_shape` (the first is [1, 2, 2, 2]).
std::string concat_norm_error(const Shape& second_shape) {
  Node n = node("ConcatBatchNormalizationNHWC", {"s", "b", "m", "v", "p0", "p1"}, {"y"});
  n.name = "dense1";
  n.domain = kRewriteDomain;
  const Tensor params = random_tensor({5}, 90);
  return testing::run_node_error(n,
                                 {params, params, params, params, random_tensor({1, 2, 2, 2}, 91),
                                  random_tensor(second_shape, 92)},
                                 1, kRewriteDomain);
}

TEST(LayoutRewrite, ConcatBatchNormNamesPartsThatDoNotFit) {
  EXPECT_EQ(concat_norm_error({1, 3, 2, 3}),
            "[ConcatBatchNormalizationNHWC] node 'dense1': part 1 float32[1, 3, 2, 3] on cpu:0 "
            "cannot be concatenated with float32[1, 2, 2, 2] on cpu:0 along channels");
  EXPECT_EQ(concat_norm_error({1, 2, 2, 2}),
            "[ConcatBatchNormalizationNHWC] node 'dense1': input 0 must hold 4 values of float32, "
            "got float32[5] on cpu:0");
}

TEST(LayoutRewrite, TrainingBatchNormStaysNchw) {
  auto r = rewrite_channels_last(*batch_norm_graph(true));
  ASSERT_NE(r, nullptr);
  for (const Node& n : r->nodes) EXPECT_NE(n.op_type, "BatchNormalizationNHWC");
  expect_same_results(batch_norm_graph(true), {random_tensor({2, 3, 6, 6}, 37)});
}

TEST(LayoutRewrite, BatchNormParametersThroughIdentityJoinTheChain) {
  // Exporters pass shared parameters through Identity nodes: 1-D values, not initializers.
  auto g = batch_norm_graph(false);
  g->nodes.insert(g->nodes.begin(), node("Identity", {"scale"}, {"scale_shared"}));
  g->nodes[2].inputs[1] = "scale_shared";
  g->value_types["scale_shared"] = f32({5});
  auto r = rewrite_channels_last(*g);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(op_types(*r), (std::vector<std::string>{"Identity", "Transpose", "ConvNHWC",
                                                    "BatchNormalizationNHWC", "Transpose"}));
  expect_same_results(g, {random_tensor({2, 3, 6, 6}, 38)});
}

TEST(LayoutRewrite, GlobalAveragePoolOverManyChannels) {
  // 150 channels over 23x19 = 437 pixels: the NHWC pool sums blocks of 256 pixel rows (a
  // partial last one) of each image and adds the blocks' sums.
  auto g = std::make_shared<Graph>();
  g->opset_imports[""] = 13;
  g->inputs.push_back({"x", f32({3, 4, 23, 19})});
  g->initializers["w"] = random_tensor({150, 4, 1, 1}, 71);
  g->nodes = {node("Conv", {"x", "w"}, {"c"}), node("GlobalAveragePool", {"c"}, {"y"})};
  g->outputs.push_back({"y", f32({3, 150, 1, 1})});
  auto r = rewrite_channels_last(*g);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->nodes[2].op_type, "GlobalAveragePoolNHWC");
  expect_same_results(g, {random_tensor({3, 4, 23, 19}, 72)});
}

TEST(LayoutRewrite, BundledCnnSameResults) {
  const char* root = std::getenv("DPRUN_SOURCE_DIR");
  std::string path = std::string(root ? root : DPRUN_SOURCE_DIR_DEFAULT) + "/models/cnn.onnx";
  Model loaded = load_model(path, Device::cpu());
  std::vector<Tensor> inputs;
  for (const TensorType& t : loaded.input_types()) {
    Shape s;
    for (const Dim& d : *t.shape) s.push_back(d.is_known() ? d.value : 3);
    inputs.push_back(random_tensor(s, 21));
  }
  expect_same_results(loaded.graph_ptr(), inputs);
}

}  // namespace
}  // namespace dprun
