#pragma once
// The activations a graph rewrite fuses into the node that produces their input (attribute
// "activation", with activation_min/max for Clip): one list for every backend's fused kernels
// (ops/cpu/fused_activation.h, ops/linalg/fused_epilogue_cuda.h) and their tests.
#include <map>
#include <string>

#include "engine/graph.h"

namespace dprun {

/// Relu, Clip [activation_min, activation_max], Sigmoid, Swish (y * sigmoid(y), SiLU), Gelu (the
/// erf form, math::GeluErfForm).
enum class FusedActivationKind { None, Relu, Clip, Sigmoid, Swish, Gelu };

/// Every value of the "activation" attribute and its kind ("" is None).
inline const std::map<std::string, FusedActivationKind>& fused_activation_kinds() {
  static const std::map<std::string, FusedActivationKind> kinds = {
      {"", FusedActivationKind::None},       {"Relu", FusedActivationKind::Relu},
      {"Clip", FusedActivationKind::Clip},   {"Sigmoid", FusedActivationKind::Sigmoid},
      {"Swish", FusedActivationKind::Swish}, {"Gelu", FusedActivationKind::Gelu}};
  return kinds;
}

/// A node's fused activation: its kind and Clip's bounds.
struct FusedActivationAttrs {
  FusedActivationKind kind = FusedActivationKind::None;
  float lo = 0, hi = 0;

  /// Reads the node's attributes; throws naming the node for an unknown activation.
  explicit FusedActivationAttrs(const Node& node)
      : lo(node.attr_float("activation_min", 0)), hi(node.attr_float("activation_max", 0)) {
    const std::string name = node.attr_string("activation", "");
    auto it = fused_activation_kinds().find(name);
    if (it == fused_activation_kinds().end()) node.fail("unknown fused activation '", name, "'");
    kind = it->second;
  }
};

}  // namespace dprun
