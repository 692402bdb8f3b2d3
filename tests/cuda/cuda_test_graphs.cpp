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

}  // namespace dprun::testing
