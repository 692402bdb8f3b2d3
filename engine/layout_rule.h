#pragma once
// How an op runs on channels-last (NHWC) values: a hook of the op, registered in its facts
// (OpFacts::layout, beside its CPU kernel), that the CPU backend's layout rewrite
// (engine/backends/cpu/layout_rewrite.cpp) asks. The rewrite decides which chains of nodes run
// in NHWC and where Transposes go; each op says whether it can take NHWC inputs and what it
// becomes when it does.
//
//   DPRUN_REGISTER_OP_FACTS({.op_type = "Relu", ..., .layout = kLayoutUnary});
//
// Only float 4-D values are ever NHWC; a value's NHWC twin has dims (N, H, W, C).
#include <functional>
#include <string>

#include "engine/graph.h"

namespace dprun {

/// What a layout rule is asked about: a node of `graph` and which values are NHWC already.
struct LayoutQuery {
  const Graph& graph;
  const Node& node;
  std::function<bool(const std::string&)> is_nhwc;
};

/// A node being rewritten to run on NHWC values: `node` is a copy of the original (in
/// `graph`) whose layout inputs are already renamed to their NHWC twins.
struct LayoutEdit {
  const Graph& graph;
  Node& node;
  /// Makes input `input` a new Constant node holding `value` (named after the node and
  /// `what`), added before the node: for layout-dependent inputs such as Pad's pads.
  std::function<void(size_t input, const std::string& what, Tensor value)>
      replace_input_with_constant;
};

/// An op's behaviour on NHWC values. The default (every member empty) is an op that needs
/// its input in the model's layout (NCHW).
struct LayoutRule {
  /// Whether the node can run with its layout inputs in NHWC; nullptr: never.
  bool (*runs_in_nhwc)(const LayoutQuery& query) = nullptr;
  /// Whether every input is a layout input (elementwise binary ops, Concat); otherwise input 0
  /// only (weights, bias, Clip's bounds and Pad's pads keep their layout).
  bool all_inputs = false;
  /// Rewrites the node for NHWC inputs (its op type, layout-dependent attributes or inputs);
  /// nullptr: it runs as it is.
  void (*to_nhwc)(LayoutEdit& edit) = nullptr;
  /// Applies an activation that follows it itself (its NHWC kernel takes the `activation`
  /// attributes): the rewrite folds a Relu, Sigmoid, constant-bound Clip or SiLU into it.
  bool absorbs_activation = false;

  bool operator==(const LayoutRule&) const = default;
};

/// Elementwise on input 0 (other inputs absent): runs as it is on NHWC values.
bool unary_runs_in_nhwc(const LayoutQuery& query);
/// Elementwise on two 4-D inputs with per-dimension broadcasting, which commutes with
/// permuting both: runs as it is when both are NHWC.
bool binary_runs_in_nhwc(const LayoutQuery& query);
inline constexpr LayoutRule kLayoutUnary = {.runs_in_nhwc = unary_runs_in_nhwc};
inline constexpr LayoutRule kLayoutBinary = {.runs_in_nhwc = binary_runs_in_nhwc,
                                             .all_inputs = true};

/// True when every input of `node` but input 0 is absent.
bool only_first_input(const Node& node);
/// True when `value` is known to be a float32 4-D value.
bool known_rank4_float(const Graph& graph, const std::string& value);
/// True when `value` is absent or known to be 0-d.
bool is_scalar(const Graph& graph, const std::string& value);

}  // namespace dprun
