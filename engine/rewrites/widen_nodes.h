#pragma once
// Runs chosen float16 and bfloat16 nodes in float32: the step shared by the rewrite for nodes
// without a 16-bit kernel (float32_fallback.h) and the conversion of a model to 16 bits, which
// keeps some ops in float32 (half_precision.h).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/graph.h"

namespace dprun {

/// A copy of `graph` in which each node n with widen[n] reads float32 copies of its float16
/// and bfloat16 inputs, made by Casts (one per value, however many nodes read it), and writes
/// float32 values that Casts turn into its outputs typed 16-bit. Outputs of unknown type are
/// written as the node writes them. Every existing value keeps its name and type; new values
/// are named after the value they convert and typed float32. The Casts are of the graph's
/// ai.onnx opset, which is imported at 13 where the graph imports only other domains.
std::shared_ptr<Graph> widen_nodes(const Graph& graph, const std::vector<bool>& widen);

/// The ai.onnx opset of the Casts a rewrite adds to `graph`: the graph's, or 13 (bfloat16's
/// first) when the graph imports only other domains.
int64_t cast_opset(const Graph& graph);
/// Cast(from) -> to, named after `to`, as ai.onnx opset `opset` has it (before opset 6 `to`
/// names the type: "FLOAT").
Node cast_node(const std::string& from, const std::string& to, DType dtype, int64_t opset);

}  // namespace dprun
