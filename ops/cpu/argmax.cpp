// ArgMax, ArgMin: int64 index of the first (or, with select_last_index, last) extreme value
// along `axis`.
#include "ops/cpu/reduce_common.h"

namespace dprun {
namespace {

template <bool IsMax>
class ArgKernel : public OpKernel {
 public:
  explicit ArgKernel(const KernelInfo& info)
      : axis_(info.node.attr_int("axis", 0)),
        keepdims_(info.node.attr_int("keepdims", 1) != 0),
        last_(info.node.attr_int("select_last_index", 0) != 0) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    const int64_t rank = x.rank();
    if (axis_ < -rank || axis_ >= rank)
      ctx.fail("axis ", axis_, " is out of range for input shape ", shape_to_string(x.shape()));
    const int64_t a = axis_ < 0 ? axis_ + rank : axis_;
    const int64_t outer = dims_product(x.shape(), 0, a);
    const int64_t D = x.shape()[static_cast<size_t>(a)];
    const int64_t inner = dims_product(x.shape(), a + 1, rank);
    Shape out_shape = x.shape();
    if (keepdims_)
      out_shape[static_cast<size_t>(a)] = 1;
    else
      out_shape.erase(out_shape.begin() + a);
    Tensor& y = ctx.allocate_output(0, out_shape, DType::Int64);
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
          return last_ ? v >= best : v > best;
        else
          return last_ ? v <= best : v < best;
      };
      ctx.parallel_for(outer * inner, std::max<int64_t>(1, 16384 / D),
                       [&](int64_t begin, int64_t end) {
                         for (int64_t j = begin; j < end; ++j) {
                           const int64_t o = j / inner, i = j % inner;
                           const T* p = xp + o * D * inner + i;
                           C best = load_as<C>(p[0]);
                           int64_t idx = 0;
                           for (int64_t d = 1; d < D; ++d) {
                             const C v = load_as<C>(p[d * inner]);
                             if (better(v, best)) {
                               best = v;
                               idx = d;
                             }
                           }
                           yp[j] = idx;
                         }
                       });
    };
    switch (x.dtype()) {
      case DType::Float16:
        return run(Float16{});
      case DType::BFloat16:
        return run(BFloat16{});
      default:
        if (!is_floating(x.dtype()) && !is_integral(x.dtype()))
          ctx.fail("input dtype ", dtype_name(x.dtype()), " is not supported");
        return visit_numeric_dtype(x.dtype(), run);
    }
  }

 private:
  int64_t axis_;
  bool keepdims_;
  bool last_;
};

DPRUN_REGISTER_KERNEL({.op_type = "ArgMax", .since = 1, .factory = make_kernel<ArgKernel<true>>});
DPRUN_REGISTER_KERNEL({.op_type = "ArgMin", .since = 1, .factory = make_kernel<ArgKernel<false>>});

}  // namespace
}  // namespace dprun
