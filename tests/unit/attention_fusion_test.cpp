// Scaled dot-product attention as exporters write it (engine/rewrites/attention_fusion.h): the
// chains that run as one Attention node, against the unfused chain computed in float64; the
// gradient builder's one rule for the chain, by finite differences and against the chain's own
// rules; its marked region run as one AttentionGrad node; and what is left unfused.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "engine/rewrites/attention_fusion.h"
#include "engine/rewrites/op_fusion.h"
#include "engine/rewrites/rewrite_domain.h"
#include "fusion_test_util.h"
#include "gradient_check.h"
#include "op_test_util.h"

namespace dprun {
namespace {

using namespace dprun::testing;

enum class Mask { None, Add, Where };

// One attention chain: ViT's 3-D layout ([L, B*H, d] stored, nn.MultiheadAttention) or GPT's
// 4-D one ([B, L, H, d] stored, heads split by Transposes), where the scale is applied, and the
// mask.
struct AttnCase {
  std::string name;
  bool gpt = false;
  int64_t l = 5, heads = 2, batch = 1, d = 3;
  bool scale_on_q = true;
  Mask mask = Mask::None;
};

std::vector<AttnCase> attn_cases() {
  return {
      {"ViT, scale on q, no mask", false, 17, 4, 2, 8, true, Mask::None},
      {"ViT, scale on S, added mask", false, 65, 2, 2, 16, false, Mask::Add},
      {"ViT, where mask", false, 17, 3, 1, 8, true, Mask::Where},
      {"GPT, causal where mask, scale on S", true, 17, 2, 3, 8, false, Mask::Where},
      {"GPT, scale on q, added mask", true, 65, 2, 2, 16, true, Mask::Add},
      {"GPT, no mask", true, 9, 4, 2, 4, false, Mask::None},
  };
}

Shape stored_shape(const AttnCase& c) {
  return c.gpt ? Shape{c.batch, c.l, c.heads, c.d} : Shape{c.l, c.batch * c.heads, c.d};
}

Tensor cast_to(const Tensor& t, DType dtype) {
  return dtype == DType::Float32 ? to_float32(t) : t;
}

// The inputs: Q, K, V stored, the scale's constant, the mask; floats in `dtype`.
std::vector<Input> attn_inputs(const AttnCase& c, DType dtype) {
  const Shape s = stored_shape(c);
  std::vector<Input> inputs = {{"xq", cast_to(random_tensor(s, -1, 1, 1), dtype)},
                               {"xk", cast_to(random_tensor(s, -1, 1, 2), dtype)},
                               {"xv", cast_to(random_tensor(s, -1, 1, 3), dtype)}};
  inputs.push_back({"d", cast_to(Tensor::scalar<double>(static_cast<double>(c.d)), dtype), true});
  if (c.mask == Mask::Add)
    inputs.push_back({"m", cast_to(random_tensor({c.l, c.l}, -2, 0, 4), dtype), true});
  if (c.mask == Mask::Where) {
    Tensor causal = Tensor::empty({c.l, c.l}, DType::Bool);
    for (int64_t i = 0; i < c.l; ++i)
      for (int64_t j = 0; j < c.l; ++j) causal.data<bool>()[i * c.l + j] = j > i;
    inputs.push_back({"c", causal, true});
    inputs.push_back(
        {"fill", cast_to(Tensor::scalar<double>(-std::numeric_limits<double>::infinity()), dtype),
         true});
  }
  return inputs;
}

Node named(Node n, const std::string& name) {
  n.name = name;
  return n;
}

Node transpose(const std::string& in, const std::string& out, std::vector<int64_t> perm) {
  return named(node("Transpose", {in}, {out}, {{"perm", Attribute::of_ints(std::move(perm))}}),
               out + "_node");
}

// The chain as the exporters write it; the scale 1 / sqrt(d) computed from d as GPT's export
// leaves it (Reciprocal of Sqrt).
std::vector<Node> attn_chain(const AttnCase& c, int64_t softmax_axis = -1) {
  std::vector<int64_t> q_perm = {1, 0, 2}, k_perm = {1, 2, 0}, o_perm = {1, 0, 2};
  if (c.gpt) {
    q_perm = {0, 2, 1, 3};
    k_perm = {0, 2, 3, 1};
    o_perm = {0, 2, 1, 3};
  }
  std::vector<Node> nodes = {named(node("Sqrt", {"d"}, {"root"}), "sqrt"),
                             named(node("Reciprocal", {"root"}, {"inv"}), "reciprocal"),
                             transpose("xq", "qt", q_perm), transpose("xk", "kt", k_perm)};
  if (c.scale_on_q) {
    nodes.push_back(named(node("Div", {"qt", "root"}, {"q"}), "scale_q"));
    nodes.push_back(named(node("MatMul", {"q", "kt"}, {"s"}), "scores"));
  } else {
    nodes.push_back(named(node("MatMul", {"qt", "kt"}, {"s0"}), "scores"));
    nodes.push_back(named(node("Mul", {"s0", "inv"}, {"s"}), "scale_s"));
  }
  std::string s = "s";
  if (c.mask == Mask::Add) nodes.push_back(named(node("Add", {"m", s}, {"sm"}), "mask"));
  if (c.mask == Mask::Where)
    nodes.push_back(named(node("Where", {"c", "fill", s}, {"sm"}), "mask"));
  if (c.mask != Mask::None) s = "sm";
  nodes.push_back(
      named(node("Softmax", {s}, {"p"}, {{"axis", Attribute::of_int(softmax_axis)}}), "softmax"));
  nodes.push_back(transpose("xv", "v", q_perm));
  nodes.push_back(named(node("MatMul", {"p", "v"}, {"o"}), "result"));
  nodes.push_back(transpose("o", "y", o_perm));
  return nodes;
}

// The chain's graph. The scalars d and fill are Constant nodes, as the exporters write them
// for training, unless `scalars_as_initializers` (parameters, which the fused node must not
// read as constants).
std::shared_ptr<Graph> attn_graph(const AttnCase& c, DType dtype, const std::vector<Node>& nodes,
                                  bool scalars_as_initializers = false) {
  auto g = make_graph(nodes, attn_inputs(c, dtype), "y", 15, Decl::Full);
  if (scalars_as_initializers) return g;
  for (const char* name : {"d", "fill"}) {
    const auto it = g->initializers.find(name);
    if (it == g->initializers.end()) continue;
    g->nodes.insert(g->nodes.begin(), named(node("Constant", {}, {name},
                                                 {{"value", Attribute::of_tensor(it->second)}}),
                                            std::string(name) + "_constant"));
    g->initializers.erase(it);
  }
  return g;
}

std::shared_ptr<Graph> attn_graph(const AttnCase& c, DType dtype) {
  return attn_graph(c, dtype, attn_chain(c));
}

int count_in_plan(std::shared_ptr<Graph> g, const std::string& op) {
  return count_ops(*compiled(std::move(g), true).plan()->graph_ptr(), op);
}

TEST(AttentionFusion, RunsAsOneNodeWithTheFloat64ChainsValues) {
  for (const AttnCase& c : attn_cases()) {
    SCOPED_TRACE(c.name);
    const Tensor want = compiled(attn_graph(c, DType::Float64), false)
                            .run(feeds_of(attn_inputs(c, DType::Float64)))[0];
    Model fused = compiled(attn_graph(c, DType::Float32), true);
    const Graph& plan = *fused.plan()->graph_ptr();
    EXPECT_EQ(count_ops(plan, "Attention"), 1);
    for (const char* op : {"Softmax", "MatMul", "FusedMatMul", "Transpose", "Where", "Div"})
      EXPECT_EQ(count_ops(plan, op), 0) << op;
    expect_near_in_scale(fused.run(feeds_of(attn_inputs(c, DType::Float32)))[0], want, 1e-5);
  }
}

TEST(AttentionFusion, LeavesAloneWhatAttentionDoesNotCompute) {
  const AttnCase c = attn_cases()[3];
  auto edited = [&](auto edit) {
    std::vector<Node> nodes = attn_chain(c);
    edit(nodes);
    return attn_graph(c, DType::Float32, nodes);
  };
  auto find = [](std::vector<Node>& nodes, const std::string& name) -> Node& {
    return *std::find_if(nodes.begin(), nodes.end(), [&](const Node& n) { return n.name == name; });
  };
  EXPECT_EQ(count_in_plan(attn_graph(c, DType::Float32), "Attention"), 1);
  // The scores are also a result.
  auto scores_out = attn_graph(c, DType::Float32);
  scores_out->outputs.push_back({"s", {}});
  EXPECT_EQ(count_in_plan(scores_out, "Attention"), 0);
  // The masked scores are read elsewhere.
  EXPECT_EQ(count_in_plan(edited([](std::vector<Node>& n) {
                            n.push_back(named(node("Relu", {"sm"}, {"unused"}), "other_reader"));
                          }),
                          "Attention"),
            0);
  // The softmax runs over another axis.
  EXPECT_EQ(count_in_plan(attn_graph(c, DType::Float32, attn_chain(c, 2)), "Attention"), 0);
  // The fill is not a constant.
  auto fill_input = attn_graph(c, DType::Float32, attn_chain(c), true);
  fill_input->inputs.push_back({"fill", {DType::Float32, SymbolicShape{}}});
  fill_input->initializers.erase("fill");
  EXPECT_EQ(count_in_plan(fill_input, "Attention"), 0);
  // The fill and the scale are parameters (initializers): their values may change between runs.
  EXPECT_EQ(count_in_plan(attn_graph(c, DType::Float32, attn_chain(c), true), "Attention"), 0);
  // The scale is not a scalar.
  EXPECT_EQ(
      count_in_plan(edited([&](std::vector<Node>& n) { find(n, "scale_s").inputs[1] = "s0"; }),
                    "Attention"),
      0);
  // V shared by the heads (broadcast over them): the kernel takes one batch shape.
  AttnCase shared = attn_cases()[5];
  std::vector<Input> inputs = attn_inputs(shared, DType::Float32);
  inputs[2].value = to_float32(random_tensor({shared.batch, shared.l, 1, shared.d}, -1, 1, 3));
  EXPECT_EQ(count_in_plan(make_graph(attn_chain(shared), inputs, "y", 15, Decl::Full), "Attention"),
            0);
  // Float64: the kernel is float32's.
  EXPECT_EQ(count_in_plan(attn_graph(c, DType::Float64), "Attention"), 0);
  // Devices without the kernel keep the nodes.
  EXPECT_EQ(fuse_ops(*attn_graph(c, DType::Float32), DeviceType::CUDA), nullptr);
  EXPECT_EQ(fuse_ops(*attn_graph(c, DType::Float32), DeviceType::Sim), nullptr);
}

// The forward chain of `c` with its gradient with respect to Q, K and V (or `wrt`), fed dY.
std::shared_ptr<Graph> attn_gradient(const AttnCase& c, DType dtype,
                                     const std::vector<std::string>& wrt = {"xq", "xk", "xv"},
                                     bool composites = true) {
  auto forward = attn_graph(c, dtype);
  GradientSpec spec;
  spec.xs = wrt;
  spec.y = "y";
  spec.dy = "dY";
  spec.differentiate_composites = composites;
  return with_gradient(*forward, spec, dtype);
}

std::vector<Tensor> attn_gradient_feeds(const AttnCase& c, DType dtype) {
  std::vector<Tensor> feeds = feeds_of(attn_inputs(c, dtype));
  Shape y = stored_shape(c);
  feeds.push_back(cast_to(random_tensor(y, -1, 1, 7), dtype));
  return feeds;
}

TEST(AttentionGrad, TheRulesBackwardIsPlainOnnxAndRunsAsOneNode) {
  for (const AttnCase& c : attn_cases()) {
    SCOPED_TRACE(c.name);
    auto plain = attn_gradient(c, DType::Float32);
    for (const Node& n : plain->nodes) EXPECT_TRUE(n.domain.empty()) << n.name;
    const std::vector<Tensor> want = compiled(attn_gradient(c, DType::Float64), false)
                                         .run(attn_gradient_feeds(c, DType::Float64));
    // The chain's own rules give the same gradients.
    const std::vector<Tensor> per_node =
        compiled(attn_gradient(c, DType::Float64, {"xq", "xk", "xv"}, false), false)
            .run(attn_gradient_feeds(c, DType::Float64));
    Model fused = compiled(plain, true);
    const Graph& plan = *fused.plan()->graph_ptr();
    EXPECT_EQ(count_ops(plan, "Attention"), 1);
    EXPECT_EQ(count_ops(plan, "AttentionGrad"), 1);
    for (const char* op :
         {"Softmax", "MatMul", "FusedMatMul", "Transpose", "ReduceSum", "SoftmaxGrad"})
      EXPECT_EQ(count_ops(plan, op), 0) << op;
    const std::vector<Tensor> got = fused.run(attn_gradient_feeds(c, DType::Float32));
    ASSERT_EQ(got.size(), want.size());
    for (size_t k = 0; k < want.size(); ++k) {
      SCOPED_TRACE("gradient " + std::to_string(k));
      // The node carries the chain's scale as a float attribute: float32's rounding of it.
      expect_near_in_scale(per_node[k], want[k], 1e-7);
      expect_near_in_scale(got[k], want[k], 1e-5);
    }
  }
}

TEST(AttentionGrad, OnlyTheWantedGradients) {
  const AttnCase c = attn_cases()[3];
  for (const std::vector<std::string>& wrt :
       {std::vector<std::string>{"xv"}, {"xq"}, {"xk", "xv"}}) {
    SCOPED_TRACE(wrt[0]);
    const std::vector<Tensor> want = compiled(attn_gradient(c, DType::Float64, wrt), false)
                                         .run(attn_gradient_feeds(c, DType::Float64));
    Model fused = compiled(attn_gradient(c, DType::Float32, wrt), true);
    EXPECT_EQ(count_ops(*fused.plan()->graph_ptr(), "AttentionGrad"), 1);
    const std::vector<Tensor> got = fused.run(attn_gradient_feeds(c, DType::Float32));
    ASSERT_EQ(got.size(), want.size());
    for (size_t k = 0; k < want.size(); ++k) expect_near_in_scale(got[k], want[k], 1e-5);
  }
}

TEST(AttentionGrad, AScaleThatIsTrainedKeepsTheChainsOwnRules) {
  // The scale's source, the initializer d, is differentiated too: the chain is not one node for
  // the gradient builder (the Attention rule would give d nothing), so d's gradient is the
  // chain's rules'.
  const AttnCase c = attn_cases()[1];
  auto forward = attn_graph(c, DType::Float64, attn_chain(c), true);
  GradientSpec spec;
  spec.xs = {"xq", "d"};
  spec.y = "y";
  spec.dy = "dY";
  auto g = with_gradient(*forward, spec, DType::Float64);
  const std::vector<Tensor> feeds = attn_gradient_feeds(c, DType::Float64);
  const std::vector<Tensor> got = compiled(g, false).run(feeds);
  spec.differentiate_composites = false;
  const std::vector<Tensor> want =
      compiled(with_gradient(*forward, spec, DType::Float64), false).run(feeds);
  ASSERT_EQ(got.size(), 2u);
  for (size_t k = 0; k < 2; ++k) expect_near_in_scale(got[k], want[k], 1e-12);
  EXPECT_NE(want[1].item_as_double(0), 0.0);
}

// The rewrite domain's Attention, which the builder differentiates the chains as, by finite
// differences in float64 (the chains unfused there: the kernels are float32's).
[[maybe_unused]] const bool kAttentionGradientCase =
    register_gradient_case(std::string(kRewriteDomain) + ".Attention", "AttentionChains", [] {
      for (AttnCase c : attn_cases()) {
        SCOPED_TRACE(c.name);
        c.l = 4;
        c.d = 3;
        c.heads = 2;
        c.batch = 1;
        check_gradients(attn_chain(c), attn_inputs(c, DType::Float64), "y", {"xq", "xk", "xv"}, 15,
                        Decl::Full, 1e-6);
      }
    });

TEST(AttentionGrad, LeavesAloneARegionThatDoesNotVerify) {
  const AttnCase c = attn_cases()[0];
  // A value of the region is also a result.
  auto g = attn_gradient(c, DType::Float32);
  auto inside = std::find_if(g->nodes.begin(), g->nodes.end(),
                             [](const Node& n) { return n.op_type == "ReduceSum"; });
  ASSERT_NE(inside, g->nodes.end());
  g->outputs.push_back({inside->outputs[0], {}});
  EXPECT_EQ(count_in_plan(g, "AttentionGrad"), 0);
  // The table is of another version.
  g = attn_gradient(c, DType::Float32);
  auto is_table = [](const Node& n) {
    if (n.op_type != "Constant") return false;
    const Tensor v = n.attr_tensor("value");
    return v.dtype() == DType::Int64 && v.numel() == 5 &&
           v.data<int64_t>()[0] == kAttentionGradMagic;
  };
  auto found = std::find_if(g->nodes.begin(), g->nodes.end(), is_table);
  ASSERT_NE(found, g->nodes.end());
  Node& table = *found;
  Tensor t = table.attr_tensor("value").clone();
  t.data<int64_t>()[1] = kAttentionGradVersion + 1;
  table.attributes["value"] = Attribute::of_tensor(t);
  EXPECT_EQ(count_in_plan(g, "AttentionGrad"), 0);
  EXPECT_EQ(count_in_plan(g, "Attention"), 1);
}

}  // namespace
}  // namespace dprun
