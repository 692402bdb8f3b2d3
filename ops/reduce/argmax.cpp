// ArgMax, ArgMin: int64 index of the first (or, with select_last_index, last) extreme value
// along `axis`.
#include "engine/op_facts.h"
#include "ops/cpu/axis_walk.h"
#include "ops/reduce/reduce_axes.h"

namespace dprun {
namespace {

template <bool IsMax>
class ArgKernel : public OpKernel {
 public:
  explicit ArgKernel(const KernelInfo& info) : axis_(info) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    const ArgAxis::Dims dims = axis_.dims(ctx, x.shape());
    const AxisSplit split{dims.outer, dims.d, dims.inner};
    const int64_t D = split.size;
    const bool last = axis_.select_last();
    Tensor& y = ctx.allocate_output(0, dims.out_shape, DType::Int64);
    if (y.numel() == 0) return;
    if (D == 0) ctx.fail("cannot take the arg", IsMax ? "max" : "min", " of an empty axis");
    auto run = [&](auto tag) {
      using T = decltype(tag);
      using C = compute_t<T>;
      const T* xp = x.data<T>();
      int64_t* yp = y.data<int64_t>();
      // Strict comparison keeps the first extreme; non-strict moves to the last.
      auto better = [&](C v, C best) {
        if constexpr (IsMax)
          return last ? v >= best : v > best;
        else
          return last ? v <= best : v < best;
      };
      ctx.parallel_for(split.lanes(), std::max<int64_t>(1, 16384 / D),
                       [&](int64_t begin, int64_t end) {
                         for_each_lane(split, begin, end, [&](const AxisLane& lane) {
                           const T* p = xp + lane.start(D);
                           C best = load_as<C>(p[0]);
                           int64_t idx = 0;
                           for (int64_t d = 1; d < D; ++d) {
                             const C v = load_as<C>(p[d * lane.stride]);
                             if (better(v, best)) {
                               best = v;
                               idx = d;
                             }
                           }
                           yp[lane.index] = idx;
                         });
                       });
    };
    visit_float_or_integer_dtype(ctx, x.dtype(), run);
  }

 private:
  ArgAxis axis_;
};

DPRUN_REGISTER_KERNEL({.op_type = "ArgMax", .since = 1, .factory = make_kernel<ArgKernel<true>>});
DPRUN_REGISTER_KERNEL({.op_type = "ArgMin", .since = 1, .factory = make_kernel<ArgKernel<false>>});

}  // namespace
}  // namespace dprun

// The ops' facts (engine/op_facts.h): output types, shapes, 16-bit and layout policy.
namespace dprun {
namespace {
DPRUN_REGISTER_OP_FACTS({.op_type = "ArgMax",
                         .dtype = OutputDTypeRule::fixed(DType::Int64),
                         .shape = ShapeKind::ReduceAxis});
DPRUN_REGISTER_OP_FACTS({.op_type = "ArgMin",
                         .dtype = OutputDTypeRule::fixed(DType::Int64),
                         .shape = ShapeKind::ReduceAxis});

}  // namespace
}  // namespace dprun
