#pragma once
// Builds and runs small multi-node graphs (with subgraphs) for tests of sequences, strings
// and control flow.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/model.h"
#include "op_test_util.h"

namespace dprun::testing {

template <class T>
std::vector<T> values_of(const Tensor& t) {
  return std::vector<T>(t.data<T>(), t.data<T>() + t.numel());
}

inline Attribute graph_attr(std::shared_ptr<Graph> g) {
  Attribute a;
  a.kind = Attribute::Kind::Graph;
  a.g = std::move(g);
  return a;
}

inline Attribute tensor_attr(Tensor t) {
  Attribute a;
  a.kind = Attribute::Kind::Tensor;
  a.t = std::move(t);
  return a;
}

inline Attribute strings_attr(std::vector<std::string> v) {
  Attribute a;
  a.kind = Attribute::Kind::Strings;
  a.strings = std::move(v);
  return a;
}

inline Attribute ints_attr(std::vector<int64_t> v) {
  Attribute a;
  a.kind = Attribute::Kind::Ints;
  a.ints = std::move(v);
  return a;
}

/// A float32 tensor type of fully known `shape`.
inline TensorType float32_type(const Shape& shape) {
  TensorType t{DType::Float32, SymbolicShape{}};
  for (int64_t d : shape) t.shape->push_back(Dim::known(d));
  return t;
}

/// A Constant node producing `value` as `output`.
inline Node constant_node(const std::string& output, Tensor value) {
  Node n = make_node("Constant", {}, {output});
  n.name = "const_" + output;
  n.attributes["value"] = tensor_attr(std::move(value));
  return n;
}

/// x [N, 4] -> MatMul W1 [4, 8] -> Add b1 -> Relu -> MatMul W2 [8, 3] -> Add b2 -> y [N, 3],
/// nodes n0..n4, parameters random (seeds 1..4); with `total`, also total = ReduceSum(y), the
/// 0-d sum of every output (node n5).
inline std::shared_ptr<Graph> small_mlp_graph(bool total) {
  auto g = std::make_shared<Graph>();
  g->name = "mlp";
  g->opset_imports[""] = 17;
  g->inputs.push_back({"x", {DType::Float32, SymbolicShape{Dim::named("N"), Dim::known(4)}}});
  g->initializers["W1"] = random_floats({4, 8}, 1);
  g->initializers["b1"] = random_floats({8}, 2);
  g->initializers["W2"] = random_floats({8, 3}, 3);
  g->initializers["b2"] = random_floats({3}, 4);
  g->nodes.push_back(make_node("MatMul", {"x", "W1"}, {"h0"}));
  g->nodes.push_back(make_node("Add", {"h0", "b1"}, {"h1"}));
  g->nodes.push_back(make_node("Relu", {"h1"}, {"h2"}));
  g->nodes.push_back(make_node("MatMul", {"h2", "W2"}, {"h3"}));
  g->nodes.push_back(make_node("Add", {"h3", "b2"}, {"y"}));
  g->outputs.push_back({"y", {DType::Float32, SymbolicShape{Dim::named("N"), Dim::known(3)}}});
  if (total) {
    Node sum = make_node("ReduceSum", {"y"}, {"total"});
    sum.attributes["keepdims"] = Attribute::of_int(0);
    g->nodes.push_back(sum);
    g->outputs.push_back({"total", {DType::Float32, SymbolicShape{}}});
  }
  for (size_t i = 0; i < g->nodes.size(); ++i) g->nodes[i].name = "n" + std::to_string(i);
  return g;
}

/// y = x W with one weight W = [[w]] (x: float32 [N, 1]), for training tests worked out by hand.
inline std::shared_ptr<Graph> one_weight_graph(float w) {
  auto g = std::make_shared<Graph>();
  g->opset_imports[""] = 17;
  g->inputs.push_back({"x", {DType::Float32, SymbolicShape{Dim::named("N"), Dim::known(1)}}});
  g->initializers["W"] = Tensor::from_vector<float>({1, 1}, {w});
  g->nodes.push_back(make_node("MatMul", {"x", "W"}, {"y"}));
  g->nodes.back().name = "matmul";
  g->outputs.push_back({"y", {DType::Float32, SymbolicShape{Dim::named("N"), Dim::known(1)}}});
  return g;
}

/// A graph over `nodes`; `inputs` are declared with the dtype (and no shape) of the paired
/// example tensor; `untyped_inputs` are declared without type (sequences, optionals).
inline std::shared_ptr<Graph> make_graph(std::vector<Node> nodes,
                                         std::vector<std::pair<std::string, DType>> inputs,
                                         std::vector<std::string> outputs,
                                         std::vector<std::string> untyped_inputs = {}) {
  auto g = std::make_shared<Graph>();
  g->name = "test_graph";
  for (auto& [name, dtype] : inputs) g->inputs.push_back({name, {dtype, std::nullopt}});
  for (auto& name : untyped_inputs) g->inputs.push_back({name, {}});
  for (auto& name : outputs) g->outputs.push_back({name, {}});
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i].name.empty() || nodes[i].name.find("_under_test") != std::string::npos)
      nodes[i].name = nodes[i].op_type + "_" + std::to_string(i);
    g->nodes.push_back(std::move(nodes[i]));
  }
  return g;
}

/// Runs a top-level graph at `opset` with tensor feeds in input order.
inline std::vector<Tensor> run_graph(std::shared_ptr<Graph> g, const std::vector<Tensor>& feeds,
                                     int64_t opset) {
  g->opset_imports[""] = opset;
  g->sort_topologically();
  Model model(g, Device::cpu());
  return model.run(feeds);
}

inline TensorType int64s_of_rank(size_t rank, int64_t dim = 1) {
  return {DType::Int64, SymbolicShape(rank, Dim::known(dim))};
}

inline Tensor int64_vector(std::vector<int64_t> values) {
  const auto n = static_cast<int64_t>(values.size());
  return Tensor::from_vector<int64_t>({n}, values);
}

/// y = Relu(Reshape(x, [dim 0 of x, -1])), the target computed as exporters write it:
/// Shape, Gather, Unsqueeze, Concat with a constant. Intermediate types as ONNX inference gives
/// them, unless `typed` is false.
inline std::shared_ptr<Graph> flatten_by_shape_graph(bool typed = true) {
  Node concat = make_node("Concat", {"batch1", "minus_one"}, {"target"});
  concat.attributes["axis"] = Attribute::of_int(0);
  auto g = testing::make_graph(
      {make_node("Shape", {"x"}, {"dims"}), make_node("Gather", {"dims", "zero"}, {"batch"}),
       make_node("Unsqueeze", {"batch", "axes"}, {"batch1"}), concat,
       make_node("Reshape", {"x", "target"}, {"flat"}), make_node("Relu", {"flat"}, {"y"})},
      {{"x", DType::Float32}}, {"y"});
  g->opset_imports[""] = 17;
  g->inputs[0].type.shape = SymbolicShape{Dim::named("batch"), Dim::known(3), Dim::known(4)};
  g->initializers["zero"] = Tensor::scalar(int64_t{0});
  g->initializers["axes"] = int64_vector({0});
  g->initializers["minus_one"] = int64_vector({-1});
  if (typed) {
    g->value_types["dims"] = int64s_of_rank(1, 3);
    g->value_types["batch"] = int64s_of_rank(0);
    g->value_types["batch1"] = int64s_of_rank(1);
    g->value_types["target"] = int64s_of_rank(1, 2);
    g->value_types["flat"] = {DType::Float32, SymbolicShape{Dim::named("batch"), Dim::known(12)}};
  }
  return g;
}

/// picked = Gather(x, Shape(s)) for an int64 vector x of 6 and a float32 s of shape [3]: x
/// read as data and a shape as indices, with the types ONNX inference gives.
inline std::shared_ptr<Graph> gather_by_shape_graph() {
  auto g = make_graph(
      {make_node("Shape", {"s"}, {"dims"}), make_node("Gather", {"x", "dims"}, {"picked"})},
      {{"x", DType::Int64}, {"s", DType::Float32}}, {"picked"});
  g->opset_imports[""] = 17;
  g->inputs[0].type.shape = SymbolicShape{Dim::known(6)};
  g->inputs[1].type.shape = SymbolicShape{Dim::known(3)};
  g->value_types["dims"] = int64s_of_rank(1, 1);
  g->value_types["picked"] = int64s_of_rank(1, 1);
  return g;
}

// Shape -> Div: the graph gives no dtype for Shape's output, so the planner cannot tell that
// the CUDA Div (float32 and float64 only) will meet int64 counts, as in a gradient graph.
inline std::shared_ptr<Graph> integer_div_graph() {
  auto graph = make_graph({make_node("Shape", {"x"}, {"s"}), make_node("Div", {"s", "s"}, {"q"})},
                          {{"x", DType::Float32}}, {"q"});
  graph->opset_imports[""] = 17;
  return graph;
}

}  // namespace dprun::testing
