// CumSum: running sum along the axis given by the second input, optionally exclusive (each
// output excludes its own element) and/or reverse (summing from the end).
#include "engine/op_facts.h"
#include "ops/common/reduce_common.h"
#include "ops/cpu/axis_walk.h"

namespace dprun {
namespace {

class CumSumKernel : public OpKernel {
 public:
  explicit CumSumKernel(const KernelInfo& info)
      : exclusive_(info.node.attr_int("exclusive", 0) != 0),
        reverse_(info.node.attr_int("reverse", 0) != 0) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    const Tensor& axis_t = ctx.input(1);
    if (axis_t.rank() > 1)
      ctx.fail("axis must be a scalar, got shape ", shape_to_string(axis_t.shape()));
    const int64_t axis = read_int_scalar(ctx, axis_t, "axis");
    const AxisSplit split = split_at_axis(x.shape(), axis_index(ctx, x.shape(), axis));
    const int64_t D = split.size, inner = split.inner;
    Tensor& y = ctx.allocate_output(0, x.shape(), x.dtype());
    if (x.numel() == 0) return;
    auto run = [&](auto tag) {
      using T = decltype(tag);
      using C = compute_t<T>;
      const T* xp = x.data<T>();
      T* yp = y.data<T>();
      ctx.parallel_for(split.outer, std::max<int64_t>(1, 16384 / std::max<int64_t>(D * inner, 1)),
                       [&](int64_t begin, int64_t end) {
                         std::vector<C> acc(static_cast<size_t>(inner));
                         for (int64_t o = begin; o < end; ++o) {
                           std::fill(acc.begin(), acc.end(), C(0));
                           for (int64_t s = 0; s < D; ++s) {
                             const int64_t d = reverse_ ? D - 1 - s : s;
                             const T* xr = xp + split.row_offset(o, d);
                             T* yr = yp + split.row_offset(o, d);
                             for (int64_t i = 0; i < inner; ++i) {
                               const C v = load_as<C>(xr[i]);
                               if (exclusive_) {
                                 yr[i] = store_as<T>(acc[i]);
                                 acc[i] = static_cast<C>(acc[i] + v);
                               } else {
                                 acc[i] = static_cast<C>(acc[i] + v);
                                 yr[i] = store_as<T>(acc[i]);
                               }
                             }
                           }
                         }
                       });
    };
    visit_float_or_integer_dtype(ctx, x.dtype(), run);
  }

 private:
  bool exclusive_;
  bool reverse_;
};

DPRUN_REGISTER_KERNEL({.op_type = "CumSum", .since = 11, .factory = make_kernel<CumSumKernel>});

}  // namespace
}  // namespace dprun

// The ops' facts (engine/op_facts.h): output types, shapes, 16-bit and layout policy.
namespace dprun {
namespace {
// Kept in float32: running sums of counts and positions: integers above 2048 are not all float16
// values.
DPRUN_REGISTER_OP_FACTS({.op_type = "CumSum",
                         .shape = ShapeKind::SameAsInput0,
                         .float32_only = true});

}  // namespace
}  // namespace dprun
