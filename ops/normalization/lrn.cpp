// LRN (local response normalization across channels) on X [N, C, D1, ...]:
//   Y = X / (bias + alpha / size * sum of X^2 over channels [c - (size-1)/2, c +
//   ceil((size-1)/2)])^beta
#include <cmath>

#include "engine/op_facts.h"
#include "ops/common/reduce_common.h"

namespace dprun {
namespace {

class LrnKernel : public OpKernel {
 public:
  explicit LrnKernel(const KernelInfo& info)
      : alpha_(info.node.attr_float("alpha", 1e-4f)),
        beta_(info.node.attr_float("beta", 0.75f)),
        bias_(info.node.attr_float("bias", 1.0f)),
        size_(info.node.attr_int("size")) {
    if (size_ <= 0) info.node.fail("size must be positive, got ", size_);
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    if (x.rank() < 2)
      ctx.fail("input must have rank >= 2 ([N, C, ...]), got shape ", shape_to_string(x.shape()));
    const int64_t N = x.shape()[0], C = x.shape()[1];
    const int64_t S = dims_product(x.shape(), 2, x.rank());
    const int64_t before = (size_ - 1) / 2, after = size_ - 1 - before;
    Tensor& y = ctx.allocate_output(0, x.shape(), x.dtype());
    visit_float_dtype(ctx, x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const T* xp = x.data<T>();
      T* yp = y.data<T>();
      const double scale = static_cast<double>(alpha_) / static_cast<double>(size_);
      ctx.parallel_for(
          N * C, std::max<int64_t>(1, 4096 / std::max<int64_t>(S * size_, 1)),
          [&](int64_t r0, int64_t r1) {
            std::vector<double> sq(static_cast<size_t>(S));
            for (int64_t r = r0; r < r1; ++r) {
              const int64_t n = r / C, c = r % C;
              std::fill(sq.begin(), sq.end(), 0.0);
              const int64_t lo = std::max<int64_t>(0, c - before);
              const int64_t hi = std::min<int64_t>(C - 1, c + after);
              for (int64_t k = lo; k <= hi; ++k) {
                const T* xk = xp + (n * C + k) * S;
                for (int64_t s = 0; s < S; ++s) {
                  const double v = load_as<double>(xk[s]);
                  sq[s] += v * v;
                }
              }
              const T* xr = xp + r * S;
              T* yr = yp + r * S;
              for (int64_t s = 0; s < S; ++s)
                yr[s] = store_as<T>(load_as<double>(xr[s]) /
                                    std::pow(bias_ + scale * sq[s], static_cast<double>(beta_)));
            }
          });
    });
  }

 private:
  float alpha_, beta_, bias_;
  int64_t size_;
};

DPRUN_REGISTER_KERNEL({.op_type = "LRN", .since = 1, .factory = make_kernel<LrnKernel>});

}  // namespace
}  // namespace dprun

// The ops' facts (engine/op_facts.h): output types, shapes, 16-bit and layout policy.
namespace dprun {
namespace {
DPRUN_REGISTER_OP_FACTS({.op_type = "LRN", .shape = ShapeKind::SameAsInput0});

}  // namespace
}  // namespace dprun
