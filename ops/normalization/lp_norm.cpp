// LpNormalization: X divided by its L1 or L2 norm along `axis` (p = 1 or 2). A zero norm
// gives zeros instead of NaN.
#include <cmath>

#include "engine/op_facts.h"
#include "ops/common/reduce_common.h"

namespace dprun {
namespace {

class LpNormKernel : public OpKernel {
 public:
  explicit LpNormKernel(const KernelInfo& info)
      : axis_(info.node.attr_int("axis", -1)), p_(info.node.attr_int("p", 2)) {
    if (p_ != 1 && p_ != 2) info.node.fail("p must be 1 or 2, got ", p_);
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    const int64_t rank = x.rank();
    if (axis_ < -rank || axis_ >= rank)
      ctx.fail("axis ", axis_, " is out of range for input shape ", shape_to_string(x.shape()));
    const int64_t a = axis_ < 0 ? axis_ + rank : axis_;
    const int64_t outer = dims_product(x.shape(), 0, a);
    const int64_t D = x.shape()[static_cast<size_t>(a)];
    const int64_t inner = dims_product(x.shape(), a + 1, rank);
    Tensor& y = ctx.allocate_output(0, x.shape(), x.dtype());
    visit_float_dtype(ctx, x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const T* xp = x.data<T>();
      T* yp = y.data<T>();
      ctx.parallel_for(outer * inner, std::max<int64_t>(1, 8192 / std::max<int64_t>(D, 1)),
                       [&](int64_t j0, int64_t j1) {
                         for (int64_t j = j0; j < j1; ++j) {
                           const int64_t base = (j / inner) * D * inner + j % inner;
                           double norm = 0;
                           for (int64_t d = 0; d < D; ++d) {
                             const double v = load_as<double>(xp[base + d * inner]);
                             norm += p_ == 1 ? std::abs(v) : v * v;
                           }
                           if (p_ == 2) norm = std::sqrt(norm);
                           const double inv = norm == 0 ? 0.0 : 1.0 / norm;
                           for (int64_t d = 0; d < D; ++d)
                             yp[base + d * inner] =
                                 store_as<T>(load_as<double>(xp[base + d * inner]) * inv);
                         }
                       });
    });
  }

 private:
  int64_t axis_;
  int64_t p_;
};

DPRUN_REGISTER_KERNEL({.op_type = "LpNormalization",
                       .since = 1,
                       .factory = make_kernel<LpNormKernel>});

}  // namespace
}  // namespace dprun

// The ops' facts (engine/op_facts.h): output types, shapes, 16-bit and layout policy.
namespace dprun {
namespace {
DPRUN_REGISTER_OP_FACTS({.op_type = "LpNormalization", .shape = ShapeKind::SameAsInput0});

}  // namespace
}  // namespace dprun
