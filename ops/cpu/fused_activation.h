#pragma once
// The activation a CPU graph rewrite fused into the node that produces its input (attribute
// "activation", with activation_min/max for Clip): ConvNHWC and BatchNormalizationNHWC from the
// layout rewrite, MatMulBias and FusedGemm from the op fusion. Applied in place on reference
// paths and as a oneDNN post-op on the fast ones.
#include <map>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>

#include "engine/dtype.h"
#include "engine/graph.h"
#include "engine/tensor.h"
#include "ops/math/unary_functors.h"

namespace dprun {

struct FusedActivation {
  /// Relu, Clip [lo, hi], Sigmoid, Swish (y * sigmoid(y), SiLU), Gelu (the erf form,
  /// math::GeluErfForm).
  enum class Kind { None, Relu, Clip, Sigmoid, Swish, Gelu };
  Kind kind = Kind::None;
  float lo = 0, hi = 0;

  /// Reads the node's attributes; throws naming the node for an unknown activation.
  explicit FusedActivation(const Node& node)
      : lo(node.attr_float("activation_min", 0)), hi(node.attr_float("activation_max", 0)) {
    static const std::map<std::string, Kind> kinds = {
        {"", Kind::None},           {"Relu", Kind::Relu},   {"Clip", Kind::Clip},
        {"Sigmoid", Kind::Sigmoid}, {"Swish", Kind::Swish}, {"Gelu", Kind::Gelu}};
    const std::string name = node.attr_string("activation", "");
    auto it = kinds.find(name);
    if (it == kinds.end()) node.fail("unknown fused activation '", name, "'");
    kind = it->second;
  }

  /// data[i] = activation(data[i]) for i < n.
  template <class T>
  void apply(T* data, int64_t n) const {
    switch (kind) {
      case Kind::None:
        return;
      case Kind::Relu:
        for (int64_t i = 0; i < n; ++i) data[i] = data[i] < T(0) ? T(0) : data[i];
        return;
      case Kind::Clip:
        for (int64_t i = 0; i < n; ++i)
          data[i] = data[i] < T(lo) ? T(lo) : (data[i] > T(hi) ? T(hi) : data[i]);
        return;
      case Kind::Sigmoid:
        for (int64_t i = 0; i < n; ++i) data[i] = math::Sigmoid{}(data[i]);
        return;
      case Kind::Swish:
        for (int64_t i = 0; i < n; ++i) data[i] = data[i] * math::Sigmoid{}(data[i]);
        return;
      case Kind::Gelu:
        for (int64_t i = 0; i < n; ++i) data[i] = math::GeluErfForm{}(data[i]);
        return;
    }
  }

  /// The activation over a float32 or float64 tensor, in place.
  void apply(Tensor& t) const {
    if (kind == Kind::None) return;
    visit_dtype_among<float, double>(t.dtype(), [&](auto tag) {
      using T = decltype(tag);
      apply(t.data<T>(), t.numel());
    });
  }

  /// The same activation as oneDNN post-ops (none for Kind::None).
  dnnl::post_ops post_ops() const {
    dnnl::post_ops ops;
    append_to(ops);
    return ops;
  }

  /// Appends the activation to `ops` (after a sum post-op, say); nothing for Kind::None.
  void append_to(dnnl::post_ops& ops) const {
    if (kind == Kind::Relu)
      ops.append_eltwise(1.f, dnnl::algorithm::eltwise_relu, 0.f, 0.f);
    else if (kind == Kind::Clip)
      ops.append_eltwise(1.f, dnnl::algorithm::eltwise_clip, lo, hi);
    else if (kind == Kind::Sigmoid)
      ops.append_eltwise(1.f, dnnl::algorithm::eltwise_logistic, 0.f, 0.f);
    else if (kind == Kind::Swish)  // x * sigmoid(alpha * x), alpha = 1
      ops.append_eltwise(1.f, dnnl::algorithm::eltwise_swish, 1.f, 0.f);
    else if (kind == Kind::Gelu)
      ops.append_eltwise(1.f, dnnl::algorithm::eltwise_gelu_erf, 0.f, 0.f);
  }
};

}  // namespace dprun
