// The backward pass of RNN, GRU and LSTM as one oneDNN node (LSTMGrad, GRUGrad, RNNGrad;
// engine/rewrites/rnn_grad_fusion.h): the same float32 training graph run with and without the
// CPU backend's fusion gives the same gradients of every input (the unrolled form is checked
// against finite differences by gradient_rnn_test.cpp), and a region that does not verify is
// left as it is. (float64 graphs are not fused: gradient_rnn_test.cpp runs them with the fusion
// on, against finite differences.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "gradient_check.h"
#include "op_test_util.h"

namespace dprun {
namespace {

using namespace dprun::testing;

// One recurrent node: [seq 5, batch 3, in 4], hidden 6.
struct Case {
  std::string op = "LSTM";
  std::string direction = "forward";
  int64_t layout = 0;
  bool states = true, bias = true, peepholes = false;
  bool all_outputs = false;  // the loss reads Y, Y_h (and Y_c), else Y alone
  std::map<std::string, Attribute> attrs = {};

  int64_t gates() const { return op == "LSTM" ? 4 : op == "GRU" ? 3 : 1; }
  int64_t dirs() const { return direction == "bidirectional" ? 2 : 1; }
  std::string describe() const {
    return op + " " + direction + " layout " + std::to_string(layout) + (states ? " states" : "") +
           (bias ? " bias" : "") + (peepholes ? " peepholes" : "") +
           (all_outputs ? " all outputs" : " Y");
  }
};

constexpr int64_t kSeq = 5, kBatch = 3, kIn = 4, kHidden = 6;

std::vector<Input> inputs_of(const Case& c) {
  const int64_t gh = c.gates() * kHidden, d = c.dirs();
  const Shape x = c.layout == 0 ? Shape{kSeq, kBatch, kIn} : Shape{kBatch, kSeq, kIn};
  const Shape state = c.layout == 0 ? Shape{d, kBatch, kHidden} : Shape{kBatch, d, kHidden};
  std::vector<Input> v = {in("X", x, 1), in("W", {d, gh, kIn}, 2), in("R", {d, gh, kHidden}, 3)};
  if (c.bias) v.push_back(in("B", {d, 2 * gh}, 4));
  if (c.states) v.push_back(in("H0", state, 5));
  if (c.states && c.op == "LSTM") v.push_back(in("C0", state, 6));
  if (c.peepholes) v.push_back(in("P", {d, 3 * kHidden}, 7));
  for (Input& i : v) i.value = to_float32(i.value);
  return v;
}

std::vector<Node> nodes_of(const Case& c) {
  std::vector<std::string> ins = {"X", "W", "R", c.bias ? "B" : "", "", c.states ? "H0" : ""};
  if (c.op == "LSTM") {
    ins.push_back(c.states ? "C0" : "");
    ins.push_back(c.peepholes ? "P" : "");
  }
  while (ins.back().empty()) ins.pop_back();
  std::vector<std::string> outs = {"Y", "Y_h"};
  if (c.op == "LSTM") outs.push_back("Y_c");
  Node n = node(c.op, ins, outs, c.attrs);
  n.attributes["hidden_size"] = Attribute::of_int(kHidden);
  n.attributes["direction"] = Attribute::of_string(c.direction);
  n.attributes["layout"] = Attribute::of_int(c.layout);
  std::vector<Node> nodes = {n};
  if (!c.all_outputs) return nodes;
  // Y [seq, dirs, batch, H] plus the states [dirs, batch, H] broadcast (layout 1: [batch, seq,
  // dirs, H] plus [batch, dirs, H] after an Unsqueeze at 1).
  std::string h = "Y_h", cell = "Y_c";
  if (c.layout == 1) {
    nodes.push_back(node("Unsqueeze", {"Y_h", "one"}, {"Y_h1"}));
    h = "Y_h1";
  }
  nodes.push_back(node("Add", {"Y", h}, {"sum"}));
  if (c.op == "LSTM") {
    if (c.layout == 1) {
      nodes.push_back(node("Unsqueeze", {"Y_c", "one"}, {"Y_c1"}));
      cell = "Y_c1";
    }
    nodes.push_back(node("Add", {"sum", cell}, {"sum_c"}));
  }
  for (size_t k = 1; k < nodes.size(); ++k) nodes[k].name = "loss_" + std::to_string(k);
  return nodes;
}

// The forward graph (opset 17) with the gradients of every fed input for the seed dY.
std::shared_ptr<Graph> gradient_graph(const Case& c) {
  std::vector<Input> inputs = inputs_of(c);
  inputs.push_back({"one", Tensor::from_vector<int64_t>({1}, {1}), true});
  const std::vector<Node> nodes = nodes_of(c);
  const std::string y = nodes.back().outputs[0];
  auto forward = make_graph(nodes, inputs, y, 17, Decl::Full);
  auto g = std::make_shared<Graph>(*forward);
  std::vector<std::string> xs;
  for (const Input& i : inputs)
    if (!i.constant) xs.push_back(i.name);
  GradientResult r = build_gradient(*forward, GradientSpec{xs, y, "dY"});
  g->inputs.push_back({"dY", {DType::Float32, std::nullopt}});
  g->nodes.insert(g->nodes.end(), r.nodes.begin(), r.nodes.end());
  g->outputs.clear();
  for (const std::string& name : r.gradients) g->outputs.push_back({name, {}});
  return g;
}

std::vector<Tensor> feeds(const Case& c, const Shape& y_shape) {
  std::vector<Tensor> f = feeds_of(inputs_of(c));
  f.push_back(to_float32(random_tensor(y_shape, -1, 1, 9)));
  return f;
}

Shape y_shape(const Case& c) {
  return c.layout == 0 ? Shape{kSeq, c.dirs(), kBatch, kHidden}
                       : Shape{kBatch, kSeq, c.dirs(), kHidden};
}

Model model_of(std::shared_ptr<Graph> g, bool fuse) {
  return Model(std::move(g), Device::cpu(), {.channels_last = false, .fuse_ops = fuse});
}

// Each gradient against the unfused graph's, within 1e-5 of its largest element (float32 sums in
// another order).
void expect_same_gradients(const std::vector<Tensor>& got, const std::vector<Tensor>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t k = 0; k < want.size(); ++k) {
    SCOPED_TRACE("gradient " + std::to_string(k));
    ASSERT_EQ(got[k].shape(), want[k].shape());
    double scale = 0;
    for (int64_t i = 0; i < want[k].numel(); ++i)
      scale = std::max(scale, std::abs(want[k].item_as_double(i)));
    ASSERT_GT(scale, 0);
    for (int64_t i = 0; i < want[k].numel(); ++i)
      ASSERT_NEAR(got[k].item_as_double(i), want[k].item_as_double(i), 1e-5 * scale)
          << "element " << i;
  }
}

// How many nodes of `op` the fused model's plan runs.
int fused_count(std::shared_ptr<Graph> g, const std::string& op) {
  return count_ops(*model_of(std::move(g), true).plan()->graph_ptr(), op);
}

void expect_fused_equals_unrolled(const Case& c) {
  SCOPED_TRACE(c.describe());
  auto g = gradient_graph(c);
  const std::vector<Tensor> want = model_of(g, false).run(feeds(c, y_shape(c)));
  Model fused = model_of(g, true);
  const Graph& plan = *fused.plan()->graph_ptr();
  EXPECT_EQ(count_ops(plan, c.op + "Grad"), 1);
  EXPECT_EQ(count_ops(plan, "MatMul"), 0);  // every step's products are gone with the region
  EXPECT_EQ(count_ops(plan, "Identity"), 0);
  expect_same_gradients(fused.run(feeds(c, y_shape(c))), want);
}

std::map<std::string, Attribute> reset(int64_t linear_before_reset) {
  return {{"linear_before_reset", Attribute::of_int(linear_before_reset)}};
}

TEST(RnnGradFusion, LstmEveryDirectionLayoutAndState) {
  for (const char* dir : {"forward", "reverse", "bidirectional"})
    for (int64_t layout : {0, 1})
      for (bool states : {false, true})
        expect_fused_equals_unrolled({.direction = dir, .layout = layout, .states = states});
}

TEST(RnnGradFusion, LstmPeepholesAndEveryOutputsGradient) {
  for (const char* dir : {"forward", "bidirectional"})
    for (int64_t layout : {0, 1}) {
      expect_fused_equals_unrolled(
          {.direction = dir, .layout = layout, .peepholes = true, .all_outputs = true});
      expect_fused_equals_unrolled({.direction = dir,
                                    .layout = layout,
                                    .states = false,
                                    .peepholes = true,
                                    .all_outputs = true});
    }
  expect_fused_equals_unrolled({.direction = "reverse", .bias = false, .all_outputs = true});
}

TEST(RnnGradFusion, GruBothResetForms) {
  for (int64_t lbr : {0, 1})
    for (const char* dir : {"forward", "reverse", "bidirectional"})
      for (bool states : {false, true}) {
        expect_fused_equals_unrolled(
            {.op = "GRU", .direction = dir, .states = states, .attrs = reset(lbr)});
        expect_fused_equals_unrolled({.op = "GRU",
                                      .direction = dir,
                                      .layout = 1,
                                      .bias = !states,
                                      .all_outputs = true,
                                      .attrs = reset(lbr)});
      }
}

TEST(RnnGradFusion, RnnTanhAndRelu) {
  Attribute relu;
  relu.kind = Attribute::Kind::Strings;
  relu.strings = {"Relu"};
  for (const char* dir : {"forward", "reverse", "bidirectional"}) {
    expect_fused_equals_unrolled({.op = "RNN", .direction = dir});
    expect_fused_equals_unrolled(
        {.op = "RNN", .direction = dir, .layout = 1, .states = false, .all_outputs = true});
    expect_fused_equals_unrolled({.op = "RNN", .direction = dir, .attrs = {{"activations", relu}}});
  }
}

TEST(RnnGradFusion, OnlySomeInputsGradients) {
  // Frozen weights: the gradients of X and the initial states alone.
  const Case c{.direction = "bidirectional", .all_outputs = true};
  auto g = gradient_graph(c);
  auto full = model_of(g, false).run(feeds(c, y_shape(c)));
  std::vector<Input> inputs = inputs_of(c);
  inputs.push_back({"one", Tensor::from_vector<int64_t>({1}, {1}), true});
  auto forward = make_graph(nodes_of(c), inputs, "sum_c", 17, Decl::Full);
  auto partial = std::make_shared<Graph>(*forward);
  GradientResult r = build_gradient(*forward, GradientSpec{{"X", "H0", "C0"}, "sum_c", "dY"});
  partial->inputs.push_back({"dY", {DType::Float32, std::nullopt}});
  partial->nodes.insert(partial->nodes.end(), r.nodes.begin(), r.nodes.end());
  partial->outputs.clear();
  for (const std::string& name : r.gradients) partial->outputs.push_back({name, {}});
  Model fused = model_of(partial, true);
  EXPECT_EQ(count_ops(*fused.plan()->graph_ptr(), "LSTMGrad"), 1);
  // The unfused graph's gradients are of X W R B H0 C0.
  expect_same_gradients(fused.run(feeds(c, y_shape(c))), {full[0], full[4], full[5]});
}

// The region's nodes: those named after the forward node's scope.
std::vector<size_t> region_nodes(const Graph& g) {
  std::vector<size_t> v;
  for (size_t k = 0; k < g.nodes.size(); ++k)
    if (g.nodes[k].name.rfind("grad/LSTM_fwd/", 0) == 0) v.push_back(k);
  return v;
}

TEST(RnnGradFusion, LeavesAloneARegionThatDoesNotVerify) {
  const Case c{.direction = "bidirectional"};
  const std::vector<Tensor> want = model_of(gradient_graph(c), false).run(feeds(c, y_shape(c)));
  auto still_unrolled = [&](std::shared_ptr<Graph> g, const char* what) {
    SCOPED_TRACE(what);
    EXPECT_EQ(fused_count(g, "LSTMGrad"), 0);
    EXPECT_GT(fused_count(g, "MatMul"), 0);
  };
  // A value inside the region is also a result.
  auto g = gradient_graph(c);
  const std::vector<size_t> region = region_nodes(*g);
  ASSERT_GT(region.size(), 100u);
  g->outputs.push_back({g->nodes[region[region.size() / 2]].outputs[0], {}});
  still_unrolled(g, "inner value read outside");
  // The table is gone.
  g = gradient_graph(c);
  ASSERT_EQ(g->nodes[region.back()].op_type, "Constant");
  g->nodes.erase(g->nodes.begin() + static_cast<std::ptrdiff_t>(region.back()));
  still_unrolled(g, "no table");
  expect_same_gradients(model_of(g, true).run(feeds(c, y_shape(c))), want);
  // A node of the region reads a value from outside it.
  g = gradient_graph(c);
  Node& mul = *std::find_if(g->nodes.begin(), g->nodes.end(), [](const Node& n) {
    return n.op_type == "Mul" && n.name.rfind("grad/LSTM_fwd/", 0) == 0;
  });
  mul.inputs[0] = "Y";
  still_unrolled(g, "outside value read");
  // Another region of the same forward node's name (two tables): neither is taken.
  g = gradient_graph(c);
  std::vector<Node> copy;
  for (size_t k : region) {
    Node n = g->nodes[k];
    n.name = "other/" + n.name;
    for (auto& out : n.outputs) out = "other/" + out;
    for (auto& in : n.inputs)
      if (in.rfind("grad/", 0) == 0) in = "other/" + in;
    copy.push_back(n);
  }
  g->nodes.insert(g->nodes.end(), copy.begin(), copy.end());
  still_unrolled(g, "two tables");
}

}  // namespace
}  // namespace dprun
