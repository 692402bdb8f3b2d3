// The CPU op fusion (engine/rewrites/op_fusion.h) and its kernels: which chains are fused,
// which are left alone, and equal results with and without the fusion.
#include "engine/rewrites/op_fusion.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <functional>
#include <map>
#include <random>
#include <tuple>

#include "accelerator_test_util.h"
#include "engine/backends/cpu/layout_rewrite.h"
#include "engine/half.h"
#include "engine/model.h"
#include "engine/parallel/replicate.h"
#include "fused_activation_reference.h"
#include "graph_test_util.h"
#include "kernel_test_util.h"
#include "loader/onnx_loader.h"
#include "op_test_util.h"
#include "ops/math/fused_activation_kind.h"

namespace dprun {
namespace {

Tensor random_tensor(Shape shape, unsigned seed, float scale = 1.f) {
  Tensor t = Tensor::empty(std::move(shape), DType::Float32);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = dist(rng);
  return t;
}

TensorType f32(const Shape& shape) {
  TensorType t{DType::Float32, SymbolicShape{}};
  for (int64_t d : shape) t.shape->push_back(Dim::known(d));
  return t;
}

Node node(const std::string& op, std::vector<std::string> in, std::vector<std::string> out) {
  Node n = testing::make_node(op, std::move(in), std::move(out));
  n.name = op + "_" + n.outputs[0];
  return n;
}

Node scalar_constant(const std::string& out, float v) {
  Node c = node("Constant", {}, {out});
  c.attributes["value"] = Attribute::of_tensor(Tensor::scalar(v));
  return c;
}

std::vector<std::string> op_types(const Graph& g) {
  std::vector<std::string> ops;
  for (const Node& n : g.nodes) ops.push_back(n.op_type);
  return ops;
}

/// Runs `graph` with and without the fusion (no layout rewrite) and compares every output.
void expect_same_results(const std::shared_ptr<const Graph>& graph,
                         const std::vector<Tensor>& inputs, double tolerance = 1e-5) {
  Model plain(graph, Device::cpu(), {.channels_last = false, .fuse_ops = false});
  Model fused(graph, Device::cpu(), {.channels_last = false, .fuse_ops = true});
  EXPECT_NE(fused.plan()->graph_ptr(), graph) << "nothing was fused";
  auto want = plain.run(inputs);
  auto got = fused.run(inputs);
  ASSERT_EQ(got.size(), want.size());
  for (size_t o = 0; o < want.size(); ++o) {
    ASSERT_EQ(got[o].shape(), want[o].shape()) << "output " << o;
    for (int64_t i = 0; i < want[o].numel(); ++i)
      ASSERT_NEAR(got[o].item_as_double(i), want[o].item_as_double(i),
                  tolerance * (1 + std::abs(want[o].item_as_double(i))))
          << "output " << o << " element " << i;
  }
}

// x [2, 3, 4] -> MatMul(x, w [4, 5]) -> Add with bias [5] -> Relu -> y.
std::shared_ptr<Graph> matmul_bias_graph(bool bias_first) {
  auto g = std::make_shared<Graph>();
  g->opset_imports[""] = 13;
  g->inputs = {{"x", f32({2, 3, 4})}};
  g->initializers["w"] = random_tensor({4, 5}, 1);
  g->initializers["bias"] = random_tensor({5}, 2);
  g->nodes = {node("MatMul", {"x", "w"}, {"mm"}),
              node("Add",
                   bias_first ? std::vector<std::string>{"bias", "mm"}
                              : std::vector<std::string>{"mm", "bias"},
                   {"biased"}),
              node("Relu", {"biased"}, {"y"})};
  g->outputs = {{"y", f32({2, 3, 5})}};
  return g;
}

TEST(OpFusion, MatMulTakesItsBiasAdd) {
  for (bool bias_first : {false, true}) {
    SCOPED_TRACE(bias_first ? "Add(bias, mm)" : "Add(mm, bias)");
    auto g = matmul_bias_graph(bias_first);
    auto r = fuse_ops(*g);
    ASSERT_NE(r, nullptr);
    // The Relu, the bias Add's only reader, is applied by the MatMulBias too.
    EXPECT_EQ(op_types(*r), (std::vector<std::string>{"MatMulBias"}));
    EXPECT_EQ(r->nodes[0].domain, kRewriteDomain);
    EXPECT_EQ(r->nodes[0].inputs, (std::vector<std::string>{"x", "w", "bias"}));
    EXPECT_EQ(r->nodes[0].outputs, (std::vector<std::string>{"y"}));
    EXPECT_EQ(r->nodes[0].attr_string("activation", ""), "Relu");
    EXPECT_EQ(r->initializers.size(), g->initializers.size());
    EXPECT_EQ(r->opset(kRewriteDomain), 1);
    expect_same_results(g, {random_tensor({2, 3, 4}, 3)});
  }
}

TEST(OpFusion, MatMulBiasNeedsAPrivateProductAndConstantOperands) {
  {  // the product is also a graph output
    auto g = matmul_bias_graph(false);
    g->outputs.push_back({"mm", f32({2, 3, 5})});
    EXPECT_EQ(fuse_ops(*g), nullptr);
  }
  {  // the product has another reader
    auto g = matmul_bias_graph(false);
    g->nodes.push_back(node("Neg", {"mm"}, {"n"}));
    g->outputs.push_back({"n", f32({2, 3, 5})});
    EXPECT_EQ(fuse_ops(*g), nullptr);
  }
  {  // a 2-D bias broadcasts differently
    auto g = matmul_bias_graph(false);
    g->initializers["bias"] = random_tensor({1, 5}, 2);
    EXPECT_EQ(fuse_ops(*g), nullptr);
  }
  {  // B fed at run time
    auto g = matmul_bias_graph(false);
    g->initializers.erase("w");
    g->inputs.push_back({"w", f32({4, 5})});
    EXPECT_EQ(fuse_ops(*g), nullptr);
  }
  {  // the bias is computed
    auto g = matmul_bias_graph(false);
    g->nodes.insert(g->nodes.begin(), node("Neg", {"bias"}, {"negated"}));
    g->nodes[2].inputs[1] = "negated";
    g->value_types["negated"] = f32({5});
    EXPECT_EQ(fuse_ops(*g), nullptr);
  }
}

Node transpose(const std::string& in, const std::string& out, std::vector<int64_t> perm) {
  Node t = node("Transpose", {in}, {out});
  if (!perm.empty()) t.attributes["perm"] = Attribute::of_ints(std::move(perm));
  return t;
}

// y = MatMul(Transpose(a), Transpose(b)), each Transpose swapping the last two dims; a and b fed
// as stored, [.., K, M] and [.., N, K], of `dtype`.
std::shared_ptr<Graph> transposed_matmul_graph(const Shape& a, const Shape& b, DType dtype,
                                               bool trans_a, bool trans_b) {
  auto g = std::make_shared<Graph>();
  g->opset_imports[""] = 13;
  auto declared = [&](const Shape& shape) {
    TensorType t = f32(shape);
    t.dtype = dtype;
    return t;
  };
  g->inputs = {{"a", declared(a)}, {"b", declared(b)}};
  auto swapped = [](std::vector<int64_t> perm) {
    std::swap(perm[perm.size() - 1], perm[perm.size() - 2]);
    return perm;
  };
  std::vector<std::string> operands = {"a", "b"};
  const Shape* shapes[2] = {&a, &b};
  const bool trans[2] = {trans_a, trans_b};
  for (size_t k = 0; k < 2; ++k) {
    if (!trans[k]) continue;
    std::vector<int64_t> perm(shapes[k]->size());
    for (size_t d = 0; d < perm.size(); ++d) perm[d] = static_cast<int64_t>(d);
    g->nodes.push_back(transpose(operands[k], operands[k] + "T", swapped(perm)));
    operands[k] += "T";
  }
  g->nodes.push_back(node("MatMul", operands, {"y"}));
  g->outputs = {{"y", TensorType{dtype, std::nullopt}}};
  return g;
}

TEST(OpFusion, MatMulReadsItsTransposedOperandsThroughStrides) {
  struct Case {
    Shape a, b;
    bool trans_a, trans_b;
  };
  for (const Case& c :
       {Case{{2, 3, 5, 4}, {2, 3, 5, 6}, true, false},
        Case{{2, 3, 4, 5}, {2, 3, 6, 5}, false, true}, Case{{2, 3, 5, 4}, {2, 3, 6, 5}, true, true},
        Case{{1, 3, 5, 4}, {2, 1, 6, 5}, true, true}, Case{{4, 7, 5}, {6, 5}, false, true},
        Case{{5, 7}, {6, 5}, true, true}})
    for (DType dtype : {DType::Float32, DType::Float64}) {  // oneDNN's path, the reference
      SCOPED_TRACE(::testing::Message() << shape_to_string(c.a) << " " << shape_to_string(c.b)
                                        << " " << dtype_name(dtype));
      auto g = transposed_matmul_graph(c.a, c.b, dtype, c.trans_a, c.trans_b);
      auto r = fuse_ops(*g);
      ASSERT_NE(r, nullptr);
      EXPECT_EQ(op_types(*r), (std::vector<std::string>{"FusedMatMul"}));
      EXPECT_EQ(r->nodes[0].inputs, (std::vector<std::string>{"a", "b"}));
      EXPECT_EQ(r->nodes[0].attr_int("transA", 0), c.trans_a ? 1 : 0);
      EXPECT_EQ(r->nodes[0].attr_int("transB", 0), c.trans_b ? 1 : 0);
      auto random = [&](const Shape& shape, unsigned seed) {
        const Tensor t = random_tensor(shape, seed);
        if (dtype == DType::Float32) return t;
        Tensor wide = Tensor::empty(shape, DType::Float64);
        for (int64_t i = 0; i < t.numel(); ++i) wide.data<double>()[i] = t.data<float>()[i];
        return wide;
      };
      expect_same_results(g, {random(c.a, 5), random(c.b, 6)});
    }
}

// Attention's products as exporters write them: q, k, v stored [B, T, H, D], the heads split
// by Transposes, S = MatMul(Transpose(q, [0, 2, 1, 3]), Transpose(k, [0, 2, 3, 1])),
// O = MatMul(S, Transpose(v, [0, 2, 1, 3])); and a batch-first product of rank 3.
TEST(OpFusion, MatMulReadsPermutedOperandsThroughStrides) {
  const int64_t B = 2, T = 5, H = 3, D = 4;
  auto g = std::make_shared<Graph>();
  g->opset_imports[""] = 13;
  g->inputs = {{"q", f32({B, T, H, D})}, {"k", f32({B, T, H, D})}, {"v", f32({B, T, H, D})}};
  g->nodes = {transpose("q", "qh", {0, 2, 1, 3}), transpose("k", "kT", {0, 2, 3, 1}),
              transpose("v", "vh", {0, 2, 1, 3}), node("MatMul", {"qh", "kT"}, {"s"}),
              node("MatMul", {"s", "vh"}, {"o"})};
  g->outputs = {{"o", f32({B, H, T, D})}};
  auto r = fuse_ops(*g);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(op_types(*r), (std::vector<std::string>{"FusedMatMul", "FusedMatMul"}));
  EXPECT_EQ(r->nodes[0].inputs, (std::vector<std::string>{"q", "k"}));
  EXPECT_EQ(r->nodes[0].attr_ints("permA"), (std::vector<int64_t>{0, 2, 1, 3}));
  EXPECT_EQ(r->nodes[0].attr_ints("permB"), (std::vector<int64_t>{0, 2, 3, 1}));
  EXPECT_EQ(r->nodes[1].attr_ints("permB"), (std::vector<int64_t>{0, 2, 1, 3}));
  expect_same_results(g, {random_tensor({B, T, H, D}, 21), random_tensor({B, T, H, D}, 22),
                          random_tensor({B, T, H, D}, 23)});
  // [T, B, C] -> [B, T, C] and [B, C, T] (torchvision's ViT), B broadcast against a matrix.
  for (const auto& [perm, a, b] :
       {std::tuple{std::vector<int64_t>{1, 0, 2}, Shape{6, 2, 4}, Shape{4, 3}},
        std::tuple{std::vector<int64_t>{1, 2, 0}, Shape{6, 2, 4}, Shape{6, 3}}}) {
    auto h = std::make_shared<Graph>();
    h->opset_imports[""] = 13;
    h->inputs = {{"a", f32(a)}, {"b", f32(b)}};
    h->nodes = {transpose("a", "t", perm), node("MatMul", {"t", "b"}, {"y"})};
    h->outputs = {{"y", TensorType{DType::Float32, std::nullopt}}};
    auto fused = fuse_ops(*h);
    ASSERT_NE(fused, nullptr);
    EXPECT_EQ(op_types(*fused), (std::vector<std::string>{"FusedMatMul"}));
    expect_same_results(h, {random_tensor(a, 24), random_tensor(b, 25)});
  }
}

TEST(OpFusion, ATransposeBackIsTheValueItself) {
  // y = x^T read by one product, z = (x^T)^T by another (a weight and its gradient's product):
  // z is x, so x^T has one reader left and folds into its product too.
  auto g = std::make_shared<Graph>();
  g->opset_imports[""] = 13;
  g->inputs = {{"x", f32({4, 5})}, {"a", f32({3, 5})}, {"b", f32({3, 4})}};
  g->nodes = {transpose("x", "xT", {1, 0}), node("MatMul", {"a", "xT"}, {"y"}),
              transpose("xT", "xTT", {1, 0}), node("MatMul", {"b", "xTT"}, {"z"})};
  g->outputs = {{"y", f32({3, 4})}, {"z", f32({3, 5})}};
  auto r = fuse_ops(*g);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(op_types(*r), (std::vector<std::string>{"FusedMatMul", "Identity", "MatMul"}));
  EXPECT_EQ(r->nodes[0].inputs, (std::vector<std::string>{"a", "x"}));
  EXPECT_EQ(r->nodes[1].inputs, (std::vector<std::string>{"x"}));
  expect_same_results(
      g, {random_tensor({4, 5}, 11), random_tensor({3, 5}, 12), random_tensor({3, 4}, 13)});
  // Permutations of rank 3: cancelled when the second inverts the first, else composed into one
  // Transpose of x.
  for (const auto& [first, second, composed] :
       {std::tuple{std::vector<int64_t>{1, 2, 0}, std::vector<int64_t>{2, 0, 1},
                   std::vector<int64_t>{}},
        std::tuple{std::vector<int64_t>{0, 2, 1}, std::vector<int64_t>{0, 2, 1},
                   std::vector<int64_t>{}},
        std::tuple{std::vector<int64_t>{1, 2, 0}, std::vector<int64_t>{1, 2, 0},
                   std::vector<int64_t>{2, 0, 1}},
        std::tuple{std::vector<int64_t>{1, 0, 2}, std::vector<int64_t>{0, 2, 1},
                   std::vector<int64_t>{1, 2, 0}}}) {
    auto h = std::make_shared<Graph>();
    h->opset_imports[""] = 13;
    h->inputs = {{"x", f32({2, 3, 4})}};
    h->nodes = {transpose("x", "t", first), node("Neg", {"t"}, {"n"}), transpose("t", "y", second)};
    h->outputs = {{"n", TensorType{DType::Float32, std::nullopt}},
                  {"y", TensorType{DType::Float32, std::nullopt}}};
    auto fused = fuse_ops(*h);
    ASSERT_NE(fused, nullptr);
    EXPECT_EQ(op_types(*fused),
              (std::vector<std::string>{"Transpose", "Neg",
                                        composed.empty() ? "Identity" : "Transpose"}));
    EXPECT_EQ(fused->nodes[2].inputs, (std::vector<std::string>{"x"}));
    if (!composed.empty()) {
      EXPECT_EQ(fused->nodes[2].attr_ints("perm"), composed);
    }
    expect_same_results(h, {random_tensor({2, 3, 4}, 14)});
  }
  {  // the first Transpose read by the second alone goes with it
    auto h = std::make_shared<Graph>();
    h->opset_imports[""] = 13;
    h->inputs = {{"x", f32({2, 3, 4})}};
    h->nodes = {transpose("x", "t", {1, 0, 2}), transpose("t", "y", {0, 2, 1})};
    h->outputs = {{"y", TensorType{DType::Float32, std::nullopt}}};
    auto fused = fuse_ops(*h);
    ASSERT_NE(fused, nullptr);
    EXPECT_EQ(op_types(*fused), (std::vector<std::string>{"Transpose"}));
    expect_same_results(h, {random_tensor({2, 3, 4}, 15)});
  }
}

TEST(OpFusion, TransposedOperandsNeedAPrivateLastTwoDimSwap) {
  auto fused_ops_of = [](const std::shared_ptr<Graph>& g) {
    auto r = fuse_ops(*g);
    return r ? op_types(*r) : std::vector<std::string>{"unchanged"};
  };
  {  // a permutation that moves the stored last dim out of the last two: no strided view
    auto g = transposed_matmul_graph({2, 5, 3, 4}, {2, 3, 5, 6}, DType::Float32, true, false);
    g->nodes[0].attributes["perm"] = Attribute::of_ints({0, 3, 2, 1});
    EXPECT_EQ(fused_ops_of(g), (std::vector<std::string>{"unchanged"}));
  }
  {  // the transposed value is also a graph output
    auto g = transposed_matmul_graph({2, 5, 4}, {2, 5, 6}, DType::Float32, true, false);
    g->outputs.push_back({"aT", f32({2, 4, 5})});
    EXPECT_EQ(fused_ops_of(g), (std::vector<std::string>{"unchanged"}));
  }
  {  // another reader: only the other operand's Transpose is folded
    auto g = transposed_matmul_graph({2, 5, 4}, {2, 6, 5}, DType::Float32, true, true);
    g->nodes.push_back(node("Neg", {"aT"}, {"n"}));
    g->outputs.push_back({"n", f32({2, 4, 5})});
    auto r = fuse_ops(*g);
    ASSERT_NE(r, nullptr);
    EXPECT_EQ(op_types(*r), (std::vector<std::string>{"Transpose", "FusedMatMul", "Neg"}));
    EXPECT_EQ(r->nodes[1].inputs, (std::vector<std::string>{"aT", "b"}));
    EXPECT_FALSE(r->nodes[1].has_attr("transA"));
    expect_same_results(g, {random_tensor({2, 5, 4}, 7), random_tensor({2, 6, 5}, 8)});
  }
  {  // the same transposed value on both sides
    auto g = transposed_matmul_graph({3, 3}, {3, 3}, DType::Float32, true, false);
    g->nodes[1].inputs = {"aT", "aT"};
    EXPECT_EQ(fused_ops_of(g), (std::vector<std::string>{"unchanged"}));
  }
  {  // Transpose without perm reverses every dim: a matrix transpose only for rank 2
    auto g = transposed_matmul_graph({5, 4}, {5, 6}, DType::Float32, true, false);
    g->nodes[0].attributes.erase("perm");
    EXPECT_EQ(fused_ops_of(g), (std::vector<std::string>{"FusedMatMul"}));
    auto batched = transposed_matmul_graph({2, 2, 2}, {2, 2, 2}, DType::Float32, true, false);
    batched->nodes[0].attributes.erase("perm");
    EXPECT_EQ(fused_ops_of(batched), (std::vector<std::string>{"unchanged"}));
  }
}

// Sum of zero Pads along one axis (the gradient of q, k, v sliced from one projection): each
// piece i of shape `pieces[i]`, padded by begins[i] before and ends[i] after along axis 2, with
// the pads as a Constant input (opset 13) or as the attribute (opset 10).
std::shared_ptr<Graph> pad_sum_graph(const std::vector<Shape>& pieces,
                                     const std::vector<std::pair<int64_t, int64_t>>& pads,
                                     int64_t opset) {
  auto g = std::make_shared<Graph>();
  g->opset_imports[""] = opset;
  std::vector<std::string> padded;
  for (size_t k = 0; k < pieces.size(); ++k) {
    const std::string x = "x" + std::to_string(k), p = "p" + std::to_string(k);
    g->inputs.push_back({x, f32(pieces[k])});
    std::vector<int64_t> amounts(2 * pieces[k].size(), 0);
    amounts[2] = pads[k].first;
    amounts[2 + pieces[k].size()] = pads[k].second;
    if (opset >= 11) {
      Node c = node("Constant", {}, {"pads" + std::to_string(k)});
      c.attributes["value"] = Attribute::of_tensor(
          Tensor::from_vector<int64_t>({static_cast<int64_t>(amounts.size())}, amounts));
      g->nodes.push_back(c);
      g->nodes.push_back(node("Pad", {x, "pads" + std::to_string(k)}, {p}));
    } else {
      Node pad = node("Pad", {x}, {p});
      pad.attributes["pads"] = Attribute::of_ints(amounts);
      g->nodes.push_back(pad);
    }
    padded.push_back(p);
  }
  g->nodes.push_back(node("Sum", padded, {"y"}));
  g->outputs = {{"y", TensorType{DType::Float32, std::nullopt}}};
  return g;
}

std::vector<Tensor> random_pieces(const std::vector<Shape>& pieces) {
  std::vector<Tensor> inputs;
  for (size_t k = 0; k < pieces.size(); ++k)
    inputs.push_back(random_tensor(pieces[k], 20 + static_cast<unsigned>(k)));
  return inputs;
}

TEST(OpFusion, PaddedPiecesAreSummedInOnePass) {
  struct Case {
    const char* what;
    std::vector<Shape> pieces;
    std::vector<std::pair<int64_t, int64_t>> pads;
  };
  for (const Case& c :
       {Case{"q k v tiling the axis", {{2, 3, 4}, {2, 3, 4}, {2, 3, 4}}, {{0, 8}, {4, 4}, {8, 0}}},
        Case{"tiling out of order", {{2, 3, 4}, {2, 3, 2}}, {{2, 0}, {0, 4}}},
        Case{"overlapping", {{2, 3, 4}, {2, 3, 4}}, {{0, 2}, {2, 0}}},
        Case{"with a gap", {{2, 3, 2}, {2, 3, 2}}, {{0, 3}, {3, 0}}},
        Case{"broadcast by the Sum", {{1, 3, 4}, {2, 3, 4}}, {{0, 4}, {4, 0}}}})
    for (int64_t opset : {10, 13}) {
      SCOPED_TRACE(::testing::Message() << c.what << ", opset " << opset);
      auto g = pad_sum_graph(c.pieces, c.pads, opset);
      auto r = fuse_ops(*g);
      ASSERT_NE(r, nullptr);
      EXPECT_EQ(op_types(*r), (std::vector<std::string>{"PadSum"}));
      const Node& fused = r->nodes[0];
      EXPECT_EQ(fused.attr_int("axis"), 2);
      std::vector<int64_t> begins, ends;
      for (const auto& [begin, end] : c.pads) {
        begins.push_back(begin);
        ends.push_back(end);
      }
      EXPECT_EQ(fused.attr_ints("begins"), begins);
      EXPECT_EQ(fused.attr_ints("ends"), ends);
      expect_same_results(g, random_pieces(c.pieces), 0);  // the same additions: bit for bit
    }
}

TEST(OpFusion, OnlyZeroPadsAlongOneAxisAreSummedInPlace) {
  const std::vector<Shape> pieces = {{2, 3, 4}, {2, 3, 4}};
  auto unchanged = [](const std::shared_ptr<Graph>& g) { return fuse_ops(*g) == nullptr; };
  {  // padding with another value
    auto g = pad_sum_graph(pieces, {{0, 4}, {4, 0}}, 10);
    g->nodes[0].attributes["value"] = Attribute::of_float(1.f);
    EXPECT_TRUE(unchanged(g));
  }
  {  // reflecting
    auto g = pad_sum_graph(pieces, {{0, 4}, {4, 0}}, 10);
    g->nodes[1].attributes["mode"] = Attribute::of_string("reflect");
    EXPECT_TRUE(unchanged(g));
  }
  {  // along two axes
    auto g = pad_sum_graph(pieces, {{0, 4}, {4, 0}}, 10);
    std::vector<int64_t> pads = g->nodes[0].attr_ints("pads");
    pads[1] = 1;
    g->nodes[0].attributes["pads"] = Attribute::of_ints(pads);
    EXPECT_TRUE(unchanged(g));
  }
  {  // a padded piece read by something else too
    auto g = pad_sum_graph(pieces, {{0, 4}, {4, 0}}, 10);
    g->nodes.push_back(node("Neg", {"p0"}, {"n"}));
    g->outputs.push_back({"n", f32({2, 3, 8})});
    EXPECT_TRUE(unchanged(g));
  }
  {  // pads fed at run time
    auto g = pad_sum_graph(pieces, {{0, 4}, {4, 0}}, 13);
    g->nodes.erase(g->nodes.begin());
    g->inputs.push_back({"pads0", TensorType{DType::Int64, SymbolicShape{Dim::known(6)}}});
    EXPECT_TRUE(unchanged(g));
  }
}

TEST(OpFusion, MatMulBiasKernelsAgreeAndCheckTheBias) {
  Node n = testing::make_node("MatMulBias", {"a", "b", "bias"}, {"y"});
  n.domain = kRewriteDomain;
  for (const Shape& a_shape : {Shape{7, 9}, Shape{2, 3, 9}, Shape{9}}) {
    SCOPED_TRACE(shape_to_string(a_shape));
    const std::vector<Tensor> inputs = {random_tensor(a_shape, 11), random_tensor({9, 6}, 12),
                                        random_tensor({6}, 13)};
    const Tensor reference = testing::run_impl(n, inputs, 13, "reference")[0];
    const Tensor fast = testing::run_impl(n, inputs, 13, "onednn")[0];
    // The reference is MatMul then Add: compare it with a hand-written product.
    Shape out = a_shape;
    out.back() = 6;
    ASSERT_EQ(reference.shape(), out);
    ASSERT_EQ(fast.shape(), out);
    const int64_t rows = inputs[0].numel() / 9;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < 6; ++j) {
        double want = inputs[2].data<float>()[j];
        for (int64_t k = 0; k < 9; ++k)
          want += double(inputs[0].data<float>()[r * 9 + k]) * inputs[1].data<float>()[k * 6 + j];
        EXPECT_NEAR(reference.data<float>()[r * 6 + j], want, 1e-5);
        EXPECT_NEAR(fast.data<float>()[r * 6 + j], want, 1e-5);
      }
  }
  const std::vector<Tensor> bad = {random_tensor({2, 9}, 1), random_tensor({9, 6}, 2),
                                   random_tensor({5}, 3)};
  for (const char* impl : {"reference", "onednn"}) {
    SCOPED_TRACE(impl);
    try {
      testing::run_impl(n, bad, 13, impl);
      ADD_FAILURE() << "a bias of the wrong size was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()),
                "[MatMulBias] node 'MatMulBias_under_test': bias has shape [5] but the product "
                "has shape [2, 6]: it must be [6]");
    }
  }
}

TEST(OpFusion, GemmTakesAnActivationOnlyWhenItIsTheOnlyReader) {
  // x -> Gemm -> Relu -> Gemm -> Sigmoid (also read by Neg) -> y, z.
  auto g = std::make_shared<Graph>();
  g->opset_imports[""] = 13;
  g->inputs = {{"x", f32({4, 6})}};
  g->initializers["w1"] = random_tensor({5, 6}, 31);
  g->initializers["b1"] = random_tensor({5}, 32);
  g->initializers["w2"] = random_tensor({5, 3}, 33);
  Node gemm1 = node("Gemm", {"x", "w1", "b1"}, {"g1"});
  gemm1.attributes["transB"] = Attribute::of_int(1);
  gemm1.attributes["alpha"] = Attribute::of_float(0.5f);
  g->nodes = {gemm1, node("Relu", {"g1"}, {"r"}), node("Gemm", {"r", "w2"}, {"g2"}),
              node("Sigmoid", {"g2"}, {"y"}), node("Neg", {"g2"}, {"z"})};
  g->outputs = {{"y", f32({4, 3})}, {"z", f32({4, 3})}};
  auto r = fuse_ops(*g);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(op_types(*r), (std::vector<std::string>{"FusedGemm", "Gemm", "Sigmoid", "Neg"}));
  EXPECT_EQ(r->nodes[0].domain, kRewriteDomain);
  EXPECT_EQ(r->nodes[0].attr_string("activation", ""), "Relu");
  EXPECT_EQ(r->nodes[0].attr_int("transB", 0), 1);
  EXPECT_EQ(r->nodes[0].attr_float("alpha", 1.f), 0.5f);
  EXPECT_EQ(r->nodes[0].outputs, (std::vector<std::string>{"r"}));
  expect_same_results(g, {random_tensor({4, 6}, 34)});
}

// A replica on a device of another type than the base's runs the model as that device's
// backend compiles it, with the base's rewrite options: fused where the base allows fusion
// (MatMulBias has a simulated-GPU kernel), as written where it does not.
TEST(OpFusion, AReplicaOfAnotherDeviceTypeIsCompiledByItsBackend) {
  auto g = matmul_bias_graph(false);
  for (bool fuse : {true, false}) {
    SCOPED_TRACE(fuse ? "fusion allowed" : "fusion off");
    Model base(g, Device::cpu(0), ModelOptions{.fuse_ops = fuse});
    EXPECT_EQ(base.rewrite_options().fusion, fuse);
    const auto replicas = replicate(base, {Device::cpu(0), Device::sim(0)});
    ASSERT_EQ(replicas.size(), 2u);
    const Plan& on_sim = *replicas[1]->plan();
    EXPECT_EQ(on_sim.device_type(), DeviceType::Sim);
    const std::vector<std::string> fused = {"MatMulBias"}, unfused = {"MatMul", "Add", "Relu"};
    EXPECT_EQ(op_types(on_sim.graph()), fuse ? fused : unfused);
    EXPECT_EQ(replicas[1]->rewrite_options().fusion, fuse);
    EXPECT_EQ(base.plan_for(Device::cpu(1)), base.plan());
  }
}

// A backend fuses only into nodes it has kernels for, for the inputs' types: the CPU's FusedGemm
// takes float64, the simulated GPU's (as CUDA's) takes float32, float16 and bfloat16 only, so
// there a float64 Gemm and its Relu stay two nodes (run on the host) instead of one fused node
// with no kernel on the device.
TEST(OpFusion, FusesOnlyIntoNodesTheDeviceRunsForTheTypes) {
  for (DType dtype : {DType::Float64, DType::Float16}) {
    SCOPED_TRACE(dtype_name(dtype));
    auto g = std::make_shared<Graph>();
    g->opset_imports[""] = 13;
    TensorType x_type = f32({4, 6});
    x_type.dtype = dtype;
    g->inputs = {{"x", x_type}};
    Tensor w = Tensor::empty({6, 5}, dtype);
    for (int64_t i = 0; i < w.numel(); ++i) {
      if (dtype == DType::Float64)
        w.data<double>()[i] = 0.25 * (i % 7);
      else
        w.data<Float16>()[i] = Float16(0.25f * float(i % 7));
    }
    g->initializers["w"] = w;
    g->nodes = {node("Gemm", {"x", "w"}, {"g"}), node("Relu", {"g"}, {"y"})};
    TensorType y_type = f32({4, 5});
    y_type.dtype = dtype;
    g->outputs = {{"y", y_type}};
    auto on_cpu = fuse_ops(*g, DeviceType::CPU);
    ASSERT_NE(on_cpu, nullptr);
    EXPECT_EQ(op_types(*on_cpu), (std::vector<std::string>{"FusedGemm"}));
    ASSERT_NE(fuse_ops(*g), nullptr) << "without a device every chain is fused";
    for (DeviceType gpu : {DeviceType::Sim, DeviceType::CUDA}) {
      auto on_gpu = fuse_ops(*g, gpu);
      if (dtype == DType::Float64) {
        EXPECT_EQ(on_gpu, nullptr);
      } else {
        ASSERT_NE(on_gpu, nullptr);
        EXPECT_EQ(op_types(*on_gpu), (std::vector<std::string>{"FusedGemm"}));
      }
    }
  }
}

TEST(OpFusion, FusedActivationsAgreeOnBothPaths) {
  // Each activation on the reference and oneDNN kernels of MatMulBias and FusedGemm equals the
  // plain op followed by the activation written out by hand (the op fusion itself gives these
  // two only Relu, Sigmoid and Gelu; the kernels take every kind).
  const auto references = testing::fused_activation_references(-0.5, 0.25);
  const std::vector<Tensor> inputs = {random_tensor({5, 8}, 41, 2.f), random_tensor({8, 7}, 42),
                                      random_tensor({7}, 43)};
  for (const char* op : {"MatMulBias", "FusedGemm"}) {
    Node plain = testing::make_node(op, {"a", "b", "c"}, {"y"});
    plain.domain = kRewriteDomain;
    const Tensor product = testing::run_impl(plain, inputs, 13, "reference")[0];
    ASSERT_EQ(product.shape(), (Shape{5, 7}));
    for (const auto& [kind, unused] : fused_activation_kinds()) {
      if (kind.empty()) continue;
      ASSERT_EQ(references.count(kind), 1u) << "no reference for the fused activation " << kind;
      const auto& f = references.at(kind);
      for (const char* impl : {"reference", "onednn"}) {
        SCOPED_TRACE(std::string(op) + " " + kind + " " + impl);
        Node fused = plain;
        fused.attributes["activation"] = Attribute::of_string(kind);
        fused.attributes["activation_min"] = Attribute::of_float(-0.5f);
        fused.attributes["activation_max"] = Attribute::of_float(0.25f);
        const Tensor got = testing::run_impl(fused, inputs, 13, impl)[0];
        for (int64_t i = 0; i < product.numel(); ++i)
          ASSERT_NEAR(got.item_as_double(i), f(product.item_as_double(i)), 1e-5) << i;
      }
    }
  }
}

/// The erf form of GELU over x [3, 50], as torch exports it (`form` "div"), with the scale as
/// a Mul by 1/sqrt 2 ("mul"), or with the 0.5 applied to x first ("half_first").
std::shared_ptr<Graph> gelu_graph(const std::string& form, float half = 0.5f) {
  auto g = std::make_shared<Graph>();
  g->opset_imports[""] = 17;
  g->inputs = {{"x", f32({3, 50})}};
  g->nodes = {scalar_constant("root2", std::sqrt(2.f)),
              scalar_constant("inv_root2", std::sqrt(.5f)), scalar_constant("one", 1.f),
              scalar_constant("half", half)};
  if (form == "mul")
    g->nodes.push_back(node("Mul", {"inv_root2", "x"}, {"scaled"}));
  else
    g->nodes.push_back(node("Div", {"x", "root2"}, {"scaled"}));
  g->nodes.push_back(node("Erf", {"scaled"}, {"erf"}));
  g->nodes.push_back(node("Add", {"one", "erf"}, {"bracket"}));
  if (form == "half_first") {
    g->nodes.push_back(node("Mul", {"x", "half"}, {"halved"}));
    g->nodes.push_back(node("Mul", {"bracket", "halved"}, {"gelu"}));
  } else {
    g->nodes.push_back(node("Mul", {"x", "bracket"}, {"product"}));
    g->nodes.push_back(node("Mul", {"product", "half"}, {"gelu"}));
  }
  g->nodes.push_back(node("Neg", {"gelu"}, {"y"}));
  g->outputs = {{"y", f32({3, 50})}};
  return g;
}

TEST(OpFusion, GeluChainsBecomeOneNode) {
  for (const char* form : {"div", "mul", "half_first"}) {
    SCOPED_TRACE(form);
    auto g = gelu_graph(form);
    auto r = fuse_ops(*g);
    ASSERT_NE(r, nullptr);
    EXPECT_EQ(op_types(*r), (std::vector<std::string>{"Constant", "Constant", "Constant",
                                                      "Constant", "Gelu", "Neg"}));
    EXPECT_EQ(r->nodes[4].domain, kRewriteDomain);
    EXPECT_EQ(r->nodes[4].inputs, (std::vector<std::string>{"x"}));
    EXPECT_EQ(r->nodes[4].outputs, (std::vector<std::string>{"gelu"}));
    expect_same_results(g, {random_tensor({3, 50}, 21, 6.f)});
  }
}

TEST(OpFusion, GeluNeedsItsConstantsAndPrivateValues) {
  EXPECT_EQ(fuse_ops(*gelu_graph("div", 0.6f)), nullptr);  // not GELU
  auto exposed = gelu_graph("div");
  exposed->outputs.push_back({"erf", f32({3, 50})});  // an intermediate value is an output
  EXPECT_EQ(fuse_ops(*exposed), nullptr);
  auto shared = gelu_graph("half_first");
  shared->nodes.push_back(node("Neg", {"halved"}, {"n"}));  // read outside the chain
  shared->outputs.push_back({"n", f32({3, 50})});
  EXPECT_EQ(fuse_ops(*shared), nullptr);
}

TEST(OpFusion, GeluKernelMatchesTheFormulaEverywhere) {
  Node n = testing::make_node("Gelu", {"x"}, {"y"});
  n.domain = kRewriteDomain;
  Tensor x = Tensor::empty({2001}, DType::Float32);
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = -10.f + 0.01f * float(i);
  const Tensor y = testing::run_impl(n, {x}, 1, "reference")[0];
  for (int64_t i = 0; i < x.numel(); ++i) {
    const double v = x.data<float>()[i];
    EXPECT_NEAR(y.data<float>()[i], 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))), 2e-6)
        << "x = " << v;
  }
}

TEST(OpFusion, TheBundledTransformerFusesItsBiasesAndGelus) {
  const char* root = std::getenv("DPRUN_SOURCE_DIR");
  const std::string path =
      std::string(root ? root : DPRUN_SOURCE_DIR_DEFAULT) + "/models/transformer.onnx";
  Model loaded = load_model(path, Device::cpu());
  auto r = fuse_ops(loaded.graph());
  ASSERT_NE(r, nullptr);
  int biases = 0, gelus = 0, erfs = 0;
  for (const Node& n : r->nodes) {
    biases += n.op_type == "MatMulBias";
    gelus += n.op_type == "MatMulBias" && n.attr_string("activation", "") == "Gelu";
    erfs += n.op_type == "Erf" || n.op_type == "Gelu";
  }
  EXPECT_EQ(biases, 12);  // q, k, v, out, ff1, ff2 in each of 2 layers
  EXPECT_EQ(gelus, 2);    // ff1 applies the GELU
  EXPECT_EQ(erfs, 0);
  std::vector<Tensor> inputs;
  for (const TensorType& t : loaded.input_types()) {
    Shape s;
    for (const Dim& d : *t.shape) s.push_back(d.is_known() ? d.value : 5);
    Tensor in = Tensor::zeros(s, t.dtype);
    for (int64_t i = 0; i < in.numel(); ++i)
      if (t.dtype == DType::Int64)
        in.data<int64_t>()[i] = (i * 7) % 50;  // token ids
      else
        in.data<float>()[i] = i % 5 == 4 ? 0.f : 1.f;  // attention mask, some positions off
    inputs.push_back(in);
  }
  expect_same_results(loaded.graph_ptr(), inputs, 1e-4);
}

TEST(OpFusion, TheEnvironmentTurnsItOff) {
  auto g = matmul_bias_graph(false);
  ::setenv("DPRUN_NO_FUSION", "1", 1);
  Model off(g, Device::cpu(0), {.channels_last = false});
  ::unsetenv("DPRUN_NO_FUSION");
  EXPECT_EQ(off.plan()->graph_ptr(), g);
  Model on(g, Device::cpu(0), {.channels_last = false});
  EXPECT_NE(on.plan()->graph_ptr(), g);
}

}  // namespace
}  // namespace dprun
