#pragma once
// The value of an ONNX Constant node, built from its attributes. The Constant kernels produce
// it, and the planner hands it to the kernels that read a Constant's output (as it hands them
// initializers), so they can read small arguments at plan time.
#include <map>
#include <string>

#include "engine/graph.h"
#include "engine/tensor.h"

namespace dprun {

/// The host tensor a Constant node produces, from whichever attribute it has: value,
/// value_float, value_floats, value_int or value_ints. Fails naming the node for sparse_value,
/// strings, a value attribute without a tensor, or no value attribute.
Tensor constant_node_value(const Node& node);

/// The values of the graph's ai.onnx Constant nodes, keyed by output name. A Constant whose
/// value cannot be built is left out (its kernel reports why when the plan is built).
std::map<std::string, Tensor> constant_node_values(const Graph& graph);

}  // namespace dprun
