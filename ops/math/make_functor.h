#pragma once
// Functors built from a node's attributes, shared by the CPU and CUDA elementwise kernels so
// that both read attributes (names, defaults, validation) the same way. Host-only C++: CUDA
// kernels call these when they are built, then pass the functor to the device by value.
#include <string>

#include "engine/kernel.h"
#include "ops/math/unary_functors.h"

namespace dprun::ew {

/// Whether a binary node broadcasts the legacy way (the broadcast and axis attributes): an
/// ai.onnx node before opset 7. Nodes of other domains (the graph rewrites', at their opset 1)
/// broadcast as numpy does.
inline bool is_legacy_broadcast(const KernelInfo& info) {
  return info.node.domain.empty() && info.opset < 7;
}

/// Builds a functor from the node's attributes; specialised for functors that have some.
template <class Op>
Op make_functor(const KernelInfo&) {
  return Op{};
}

template <>
inline math::IsInf make_functor<math::IsInf>(const KernelInfo& info) {
  return {info.node.attr_int("detect_positive", 1) != 0,
          info.node.attr_int("detect_negative", 1) != 0};
}
template <>
inline math::LeakyRelu make_functor<math::LeakyRelu>(const KernelInfo& info) {
  return {info.node.attr_float("alpha", 0.01f)};
}
template <>
inline math::Elu make_functor<math::Elu>(const KernelInfo& info) {
  return {info.node.attr_float("alpha", 1.0f)};
}
template <>
inline math::Selu make_functor<math::Selu>(const KernelInfo& info) {
  return {info.node.attr_float("alpha", 1.67326319217681884765625f),
          info.node.attr_float("gamma", 1.05070102214813232421875f)};
}
template <>
inline math::Celu make_functor<math::Celu>(const KernelInfo& info) {
  float alpha = info.node.attr_float("alpha", 1.0f);
  if (alpha == 0.0f) info.node.fail("alpha must be non-zero");
  return {alpha};
}
template <>
inline math::HardSigmoid make_functor<math::HardSigmoid>(const KernelInfo& info) {
  return {info.node.attr_float("alpha", 0.2f), info.node.attr_float("beta", 0.5f)};
}
template <>
inline math::ThresholdedRelu make_functor<math::ThresholdedRelu>(const KernelInfo& info) {
  return {info.node.attr_float("alpha", 1.0f)};
}
template <>
inline math::Shrink make_functor<math::Shrink>(const KernelInfo& info) {
  return {info.node.attr_float("lambd", 0.5f), info.node.attr_float("bias", 0.0f)};
}

/// Gelu's `approximate`: true for "tanh", false for "none"; fails on anything else. Kernels
/// pick the functor (math::GeluTanh or math::Gelu) from it when built.
inline bool gelu_uses_tanh(const KernelInfo& info) {
  std::string approx = info.node.attr_string("approximate", "none");
  if (approx != "none" && approx != "tanh")
    info.node.fail("approximate must be 'none' or 'tanh', got '", approx, "'");
  return approx == "tanh";
}

}  // namespace dprun::ew
