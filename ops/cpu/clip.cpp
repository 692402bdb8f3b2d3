// Clip. Opsets 1-10 take min/max as float attributes; 11+ take optional scalar inputs (and
// integer types from 12). When min > max every element becomes max.
#include "ops/cpu/elementwise.h"
#include "ops/math/select.h"

namespace dprun::ew {
namespace {

class ClipKernel : public OpKernel {
 public:
  explicit ClipKernel(const KernelInfo& info) : attrs_(info.opset < 11) {
    if (attrs_) {
      min_ = info.node.attr_float("min", -std::numeric_limits<float>::infinity());
      max_ = info.node.attr_float("max", std::numeric_limits<float>::infinity());
    }
  }

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
        if (attrs_) {
          if constexpr (std::is_floating_point_v<C>) {
            lo = static_cast<C>(min_);
            hi = static_cast<C>(max_);
          } else {
            fail_dtype(ctx, x.dtype());  // Clip before opset 11 is float-only
          }
        } else {
          if (const Tensor* t = ctx.optional_input(1)) lo = bound<T>(ctx, *t, "min");
          if (const Tensor* t = ctx.optional_input(2)) hi = bound<T>(ctx, *t, "max");
        }
        unary_map(ctx.execution(), x.data<T>(), y.data<T>(), x.numel(), [lo, hi](T v) {
          // math::select keeps the loop vectorisable; NaN compares false and passes through.
          C c = static_cast<C>(v);
          c = math::select(c < lo, lo, c);
          c = math::select(c > hi, hi, c);
          return T(c);
        });
      }
    });
  }

 private:
  template <class T>
  static compute_t<T> bound(const KernelContext& ctx, const Tensor& t, const char* name) {
    if (t.dtype() != dtype_of<T>())
      ctx.fail(name, " is ", dtype_name(t.dtype()), " but input is ", dtype_name(dtype_of<T>()));
    if (t.numel() != 1) ctx.fail(name, " must be a scalar, got shape ", shape_to_string(t.shape()));
    return static_cast<compute_t<T>>(t.data<T>()[0]);
  }

  bool attrs_;
  float min_ = 0, max_ = 0;
};

DPRUN_REGISTER_KERNEL({.op_type = "Clip", .since = 1, .factory = make_kernel<ClipKernel>});

}  // namespace
}  // namespace dprun::ew
