#pragma once
// Questions the CPU backend's graph rewrites ask of a graph while matching patterns: which
// values are known when the graph is compiled, and who reads a value.
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "engine/graph.h"

namespace dprun {

/// A value known when the graph is compiled: an initializer that callers cannot override (not
/// also a graph input), or a Constant node's output (engine/constant_value.h); nullopt
/// otherwise. An initializer
/// is a parameter: its value may change between runs, its shape may not.
std::optional<Tensor> constant_value(const Graph& graph, const std::string& value);

/// The value of a float32 scalar (one element) known when the graph is compiled, or nullopt.
std::optional<float> constant_scalar(const Graph& graph, const std::string& value);

/// The value of a one-element constant of any floating type (exporters write a model's constants
/// in its type), or nullopt.
std::optional<double> floating_scalar(const Graph& graph, const std::string& value);

/// The value of a 1-D int64 tensor known when the graph is compiled, or nullopt.
std::optional<std::vector<int64_t>> constant_ints(const Graph& graph, const std::string& value);

/// The axes of a reduction, Squeeze or Unsqueeze node, wherever its opset puts them: its second
/// input (known when the graph is compiled), or else its "axes" attribute; nullopt when neither
/// gives them (a reduction over every axis, or axes computed at run time).
std::optional<std::vector<int64_t>> axes_operand(const Graph& graph, const Node& node);

/// For every value, the indices of the nodes that read it (each node once, in graph order),
/// implicit subgraph inputs included.
std::map<std::string, std::vector<size_t>> value_readers(const Graph& graph);

/// True when `value` is a graph output or a state update's source: it must keep its name.
bool is_graph_result(const Graph& graph, const std::string& value);

}  // namespace dprun
