// Clip. Opsets 1-10 take min/max as float attributes; 11+ take optional scalar inputs (and
// integer types from 12). When min > max every element becomes max.
#include "ops/elementwise/clip.h"

#include "engine/op_facts.h"
#include "engine/rewrites/graph_patterns.h"
#include "ops/cpu/elementwise.h"
#include "ops/math/clip.h"

namespace dprun::ew {
namespace {

class ClipKernel : public OpKernel {
 public:
  explicit ClipKernel(const KernelInfo& info) : params_(info) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    Tensor& y = ctx.allocate_output(0, x.shape(), x.dtype());
    visit_dtype(x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      if constexpr (!accepts<Types::Numeric, T>()) {
        fail_dtype(ctx, x.dtype());
      } else {
        using C = compute_t<T>;
        C lo = std::numeric_limits<C>::lowest(), hi = std::numeric_limits<C>::max();
        if (params_.from_attributes()) {
          if constexpr (std::is_floating_point_v<C>) {
            lo = static_cast<C>(params_.min_attr());
            hi = static_cast<C>(params_.max_attr());
          } else {
            fail_dtype(ctx, x.dtype());  // Clip before opset 11 is float-only
          }
        } else {
          if (const Tensor* t = ctx.optional_input(1)) lo = bound<T>(ctx, *t, "min");
          if (const Tensor* t = ctx.optional_input(2)) hi = bound<T>(ctx, *t, "max");
        }
        unary_map(ctx.execution(), x.data<T>(), y.data<T>(), x.numel(),
                  [lo, hi](T v) { return T(math::clip(static_cast<C>(v), lo, hi)); });
      }
    });
  }

 private:
  template <class T>
  static compute_t<T> bound(const KernelContext& ctx, const Tensor& t, const char* name) {
    ClipParams::check_bound(ctx, t, dtype_of<T>(), name);
    return static_cast<compute_t<T>>(t.data<T>()[0]);
  }

  ClipParams params_;
};

DPRUN_REGISTER_KERNEL({.op_type = "Clip", .since = 1, .factory = make_kernel<ClipKernel>});

}  // namespace
}  // namespace dprun::ew

// The ops' facts (engine/op_facts.h): output types, shapes, 16-bit and layout policy.
namespace dprun {
namespace {

/// Elementwise on input 0, with bounds that are scalars (or known when the graph is compiled).
bool clip_runs_in_nhwc(const LayoutQuery& query) {
  const Node& n = query.node;
  auto bound_ok = [&](size_t k) {
    return n.inputs.size() <= k || is_scalar(query.graph, n.inputs[k]) ||
           constant_scalar(query.graph, n.inputs[k]).has_value();
  };
  return query.is_nhwc(n.inputs[0]) && bound_ok(1) && bound_ok(2);
}

DPRUN_REGISTER_OP_FACTS({.op_type = "Clip",
                         .shape = ShapeKind::SameAsInput0,
                         .layout = {.runs_in_nhwc = clip_runs_in_nhwc}});

}  // namespace
}  // namespace dprun
