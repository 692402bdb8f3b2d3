#pragma once
// Runs a single ONNX node through the real registry and executor, for kernel tests.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine/model.h"

namespace dprun::testing {

/// A one-node graph of `node`: its inputs named by node.inputs, typed after `inputs` in that
/// order (empty names stay omitted), except those named in `initializers`, which become
/// initializers of the graph (constants of the plan); `opset` imported for `domain_of_opset`.
inline std::shared_ptr<Graph> single_node_graph(const Node& node, const std::vector<Tensor>& inputs,
                                                int64_t opset, const std::string& domain_of_opset,
                                                const std::map<std::string, Tensor>& initializers) {
  auto graph = std::make_shared<Graph>();
  graph->name = "single_" + node.op_type;
  graph->opset_imports[domain_of_opset] = opset;
  if (!domain_of_opset.empty()) graph->opset_imports[""] = opset;
  size_t fed = 0;
  for (const auto& name : node.inputs) {
    if (name.empty()) continue;
    if (auto it = initializers.find(name); it != initializers.end()) {
      graph->initializers[name] = it->second;
      continue;
    }
    DPRUN_CHECK(fed < inputs.size(), "run_node: too few inputs");
    const Tensor& t = inputs[fed++];
    SymbolicShape shape;
    for (int64_t d : t.shape()) shape.push_back(Dim::known(d));
    graph->inputs.push_back({name, {t.dtype(), shape}});
  }
  for (const auto& name : node.outputs)
    if (!name.empty()) graph->outputs.push_back({name, {}});
  graph->nodes.push_back(node);
  return graph;
}

/// Builds single_node_graph(...), compiles it for `device` at `opset`, runs it on `inputs` (the
/// fed ones) and returns the node's outputs (on `device`). To force one kernel implementation
/// use run_impl in kernel_test_util.h.
inline std::vector<Tensor> run_node(const Node& node, const std::vector<Tensor>& inputs,
                                    int64_t opset, const std::string& domain_of_opset = "",
                                    Device device = Device::cpu(),
                                    const std::map<std::string, Tensor>& initializers = {}) {
  auto graph = single_node_graph(node, inputs, opset, domain_of_opset, initializers);
  Model model(graph, device);
  const auto fed = static_cast<std::ptrdiff_t>(graph->inputs.size());
  return model.run(std::vector<Tensor>(inputs.begin(), inputs.begin() + fed));
}

/// The message of the Error that run_node(node, inputs, opset, domain_of_opset) throws, or
/// "no error".
inline std::string run_node_error(const Node& node, const std::vector<Tensor>& inputs,
                                  int64_t opset, const std::string& domain_of_opset = "") {
  try {
    run_node(node, inputs, opset, domain_of_opset);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

/// A node with the given op, inputs and outputs; attributes are added by the caller.
inline Node make_node(const std::string& op, std::vector<std::string> inputs,
                      std::vector<std::string> outputs) {
  Node n;
  n.name = op + "_under_test";
  n.op_type = op;
  n.inputs = std::move(inputs);
  n.outputs = std::move(outputs);
  return n;
}

/// A float32 tensor of `shape` with values uniform in [-1, 1), the same for the same seed.
inline Tensor random_floats(const Shape& shape, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1, 1);
  std::vector<float> v(static_cast<size_t>(shape_numel(shape)));
  for (auto& x : v) x = dist(rng);
  return Tensor::from_vector<float>(shape, v);
}

/// Expects `t` to have `shape` and, element by element, `values` within `tol`.
inline void expect_values(const Tensor& t, const Shape& shape, const std::vector<double>& values,
                          double tol = 1e-5) {
  ASSERT_EQ(shape_to_string(t.shape()), shape_to_string(shape));
  ASSERT_EQ(t.numel(), static_cast<int64_t>(values.size()));
  for (int64_t i = 0; i < t.numel(); ++i)
    EXPECT_NEAR(t.item_as_double(i), values[static_cast<size_t>(i)], tol) << "element " << i;
}

}  // namespace dprun::testing
