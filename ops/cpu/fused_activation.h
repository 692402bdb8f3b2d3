#pragma once
// The activation a CPU graph rewrite fused into the node that produces its input (attribute
// "activation", with activation_min/max for Clip): ConvNHWC and BatchNormalizationNHWC from the
// layout rewrite, MatMulBias and FusedGemm from the op fusion. Applied in place on reference
// paths; on the oneDNN paths as a post-op, or as a pass after the primitive where oneDNN's
// post-op is the slower (applied_after_onednn).
#include <map>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>

#include "engine/dtype.h"
#include "engine/graph.h"
#include "engine/kernel.h"
#include "engine/tensor.h"
#include "ops/cpu/simd_loops.h"
#include "ops/math/clip.h"
#include "ops/math/fused_activation_kind.h"
#include "ops/math/unary_functors.h"

namespace dprun {

struct FusedActivation : FusedActivationAttrs {
  using Kind = FusedActivationKind;
  using FusedActivationAttrs::FusedActivationAttrs;

  /// Every value of the "activation" attribute and its kind (fused_activation_kinds()).
  static const std::map<std::string, Kind>& names() { return fused_activation_kinds(); }

  /// data[i] = activation(data[i]) for i < n; float32 runs the loops of simd_loops.h.
  template <class T>
  void apply(T* data, int64_t n) const {
    switch (kind) {
      case Kind::None:
        return;
      case Kind::Relu:  // NaN passes, as through Relu's kernel
        return map([](auto v) { return math::select(v < T(0), T(0), v); }, data, n);
      case Kind::Clip:
        return map([l = T(lo), h = T(hi)](auto v) { return math::clip(v, l, h); }, data, n);
      case Kind::Sigmoid:
        return map(math::Sigmoid{}, data, n);
      case Kind::Swish:
        return map(math::Silu{}, data, n);
      case Kind::Gelu:
        return map(math::GeluErfForm{}, data, n);
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

  /// Whether the activation is left out of the oneDNN post-ops (append_to) and must be applied
  /// to the primitive's output with apply_after_onednn. oneDNN 2.6's swish post-op made a 1x1
  /// Conv (16 to 96 channels, 112 x 112, batch 8) take 5.9 instead of 2.9 ms; the convolution
  /// followed by a vectorised SiLU pass over its output takes 4.4 ms (bench/README.md). Its other
  /// activations cost no more as post-ops than as a pass, and save the pass's memory traffic.
  bool applied_after_onednn() const { return kind == Kind::Swish; }

  /// Applies the activation to a oneDNN primitive's float32 output `y` in place, split over
  /// the run's threads, when applied_after_onednn(); nothing otherwise.
  void apply_after_onednn(KernelContext& ctx, Tensor& y) const {
    if (!applied_after_onednn()) return;
    float* data = y.data<float>();
    ctx.parallel_for(y.numel(), 1 << 14,
                     [&](int64_t begin, int64_t end) { apply(data + begin, end - begin); });
  }

  /// The same activation as oneDNN post-ops, less one applied_after_onednn (none for
  /// Kind::None).
  dnnl::post_ops post_ops() const {
    dnnl::post_ops ops;
    append_to(ops);
    return ops;
  }

  /// Appends the activation to `ops` (after a sum post-op, say) unless applied_after_onednn();
  /// nothing for Kind::None.
  void append_to(dnnl::post_ops& ops) const {
    if (kind == Kind::Relu)
      ops.append_eltwise(1.f, dnnl::algorithm::eltwise_relu, 0.f, 0.f);
    else if (kind == Kind::Clip)
      ops.append_eltwise(1.f, dnnl::algorithm::eltwise_clip, lo, hi);
    else if (kind == Kind::Sigmoid)
      ops.append_eltwise(1.f, dnnl::algorithm::eltwise_logistic, 0.f, 0.f);
    else if (kind == Kind::Gelu)
      ops.append_eltwise(1.f, dnnl::algorithm::eltwise_gelu_erf, 0.f, 0.f);
  }

 private:
  template <class F, class T>
  static void map(const F& f, T* data, int64_t n) {
    if constexpr (std::is_same_v<T, float>)
      simd::map(f, data, data, n);
    else
      for (int64_t i = 0; i < n; ++i) data[i] = f(data[i]);
  }
};

}  // namespace dprun
