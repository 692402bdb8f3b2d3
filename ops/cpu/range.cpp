// Range: start, start + delta, ... up to (excluding) limit.
#include <cmath>

#include "ops/cpu/data_movement.h"

namespace dprun {
namespace {

class RangeKernel : public OpKernel {
 public:
  explicit RangeKernel(const KernelInfo&) {}
  void compute(KernelContext& ctx) const override {
    const Tensor& start_t = ctx.input(0);
    const Tensor& limit_t = ctx.input(1);
    const Tensor& delta_t = ctx.input(2);
    const DType dtype = start_t.dtype();
    for (const Tensor* t : {&start_t, &limit_t, &delta_t}) {
      if (t->numel() != 1) ctx.fail("start, limit and delta must be scalars, got ", t->describe());
      if (t->dtype() != dtype)
        ctx.fail("start, limit and delta must share one dtype, got ", dtype_name(dtype), " and ",
                 dtype_name(t->dtype()));
    }
    visit_numeric_dtype(dtype, [&](auto zero) {
      using T = decltype(zero);
      const T start = *start_t.data<T>(), limit = *limit_t.data<T>(), delta = *delta_t.data<T>();
      if (delta == T(0)) ctx.fail("delta must be non-zero");
      int64_t n;
      if constexpr (std::is_floating_point_v<T>) {
        n = static_cast<int64_t>(
            std::max(0.0, std::ceil((static_cast<double>(limit) - static_cast<double>(start)) /
                                    static_cast<double>(delta))));
      } else {
        // Exact integer length; differences are taken in a wider type to avoid overflow.
        using W = std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>;
        if (delta > T(0))
          n = limit > start ? static_cast<int64_t>((W(limit) - W(start) - 1) / W(delta) + 1) : 0;
        else if constexpr (std::is_signed_v<T>)
          n = start > limit ? static_cast<int64_t>((W(start) - W(limit) - 1) / -W(delta) + 1) : 0;
        else
          n = 0;
      }
      Tensor& y = ctx.allocate_output(0, {n}, dtype);
      T* out = y.data<T>();
      for (int64_t i = 0; i < n; ++i) out[i] = static_cast<T>(start + static_cast<T>(i) * delta);
    });
  }
};

DPRUN_REGISTER_KERNEL({.op_type = "Range", .since = 11, .factory = make_kernel<RangeKernel>});

}  // namespace
}  // namespace dprun
