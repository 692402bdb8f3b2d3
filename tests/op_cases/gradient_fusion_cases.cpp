// The CUDA kernels of the fused gradient nodes (engine/rewrites/op_fusion.h) BatchNormTrainingGrad
// and ReluGrad, compared with the CPU kernels on the same random inputs: the shapes of the CPU's
// tests, a channel of more values than a block has threads, an empty batch, and ReluGrad's
// broadcasting and float64.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "engine/rewrites/rewrite_domain.h"
#include "op_cases/op_cases.h"

namespace dprun {
namespace {

const std::set<std::string> kCoveredOps = {"BatchNormTrainingGrad", "ReluGrad"};

using testing::dims_name;
using testing::floats;
using testing::InputSpec;
using testing::node_with;
using testing::OpCase;

Node rewrite_node(const std::string& op, std::vector<std::string> inputs,
                  std::vector<std::string> outputs) {
  Node n = node_with(op, std::move(inputs));
  n.domain = kRewriteDomain;
  n.outputs = std::move(outputs);
  return n;
}

void add_batch_norm_cases(std::vector<OpCase>& cases) {
  for (const Shape& x : std::vector<Shape>{
           {4, 3, 5, 6}, {6, 4}, {3, 2, 7}, {2, 3, 2, 3, 4}, {2, 2, 1500}, {0, 3, 4, 4}}) {
    Node n = rewrite_node("BatchNormTrainingGrad", {"x", "dy", "scale"}, {"dx", "dscale", "db"});
    n.attributes["epsilon"] = Attribute::of_float(1e-3f);
    cases.push_back({.name = "BatchNormTrainingGrad_" + dims_name(x),
                     .node = std::move(n),
                     .inputs = {floats(x), floats(x), floats({x[1]}, 0.5, 2.0)},
                     .opset = 1});
  }
}

void add_relu_grad_cases(std::vector<OpCase>& cases) {
  struct Shapes {
    Shape dy, x;
  };
  for (DType dtype : {DType::Float32, DType::Float64})
    for (const Shapes& s : std::vector<Shapes>{{{2, 3, 4, 5}, {2, 3, 4, 5}}, {{4}, {2, 4}}}) {
      InputSpec dy = floats(s.dy), x = floats(s.x);
      dy.dtype = x.dtype = dtype;
      x.whole = true;  // zeros among the values: Relu's subgradient there is 0
      cases.push_back({.name = "ReluGrad_" + std::string(dtype_name(dtype)) + "_" +
                               dims_name(s.dy) + "_" + dims_name(s.x),
                       .node = rewrite_node("ReluGrad", {"dy", "x"}, {"dx"}),
                       .inputs = {dy, x},
                       .opset = 1});
    }
}

DPRUN_OP_CASES(GradientFusion, kCoveredOps, add_batch_norm_cases, add_relu_grad_cases);

}  // namespace
}  // namespace dprun
