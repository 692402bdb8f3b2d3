#include "cuda/cuda_test_kernels.h"

namespace dprun::testing {

std::shared_ptr<Graph> add_one_graph(int64_t width) {
  auto g = std::make_shared<Graph>();
  g->name = "add_one";
  g->opset_imports[""] = 13;
  g->opset_imports["dprun.test"] = 1;
  g->inputs.push_back(
      {"x", {DType::Float32, SymbolicShape{Dim::named("batch"), Dim::known(width)}}});
  Node n;
  n.name = "add_one";
  n.domain = "dprun.test";
  n.op_type = "AddOne";
  n.inputs = {"x"};
  n.outputs = {"y"};
  g->nodes.push_back(n);
  g->outputs.push_back({"y", {DType::Float32, std::nullopt}});
  return g;
}

std::shared_ptr<Graph> host_fallback_graph(int64_t width) {
  auto g = add_one_graph(width);
  g->name = "host_fallback";
  g->nodes[0].outputs = {"a"};
  g->initializers["axis"] = Tensor::scalar<int64_t>(1);
  Node cumsum;
  cumsum.name = "cumsum";
  cumsum.op_type = "CumSum";
  cumsum.inputs = {"a", "axis"};
  cumsum.outputs = {"b"};
  g->nodes.push_back(cumsum);
  Node again = g->nodes[0];
  again.name = "add_one_again";
  again.inputs = {"b"};
  again.outputs = {"y"};
  g->nodes.push_back(again);
  return g;
}

}  // namespace dprun::testing
