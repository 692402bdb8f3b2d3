// Det: determinants of the square matrices in the last two dimensions of X ([*, M, M]),
// by LU decomposition with partial pivoting.
#include <cmath>
#include <utility>
#include <vector>

#include "engine/op_facts.h"
#include "ops/common/reduce_common.h"

namespace dprun {
namespace {

template <class C>
C determinant(std::vector<C>& a, int64_t m) {
  C det = 1;
  for (int64_t col = 0; col < m; ++col) {
    int64_t piv = col;
    for (int64_t r = col + 1; r < m; ++r)
      if (std::abs(a[r * m + col]) > std::abs(a[piv * m + col])) piv = r;
    if (a[piv * m + col] == C(0)) return C(0);
    if (piv != col) {
      for (int64_t k = 0; k < m; ++k) std::swap(a[col * m + k], a[piv * m + k]);
      det = -det;
    }
    const C d = a[col * m + col];
    det *= d;
    for (int64_t r = col + 1; r < m; ++r) {
      const C f = a[r * m + col] / d;
      for (int64_t k = col; k < m; ++k) a[r * m + k] -= f * a[col * m + k];
    }
  }
  return det;
}

class DetKernel : public OpKernel {
 public:
  explicit DetKernel(const KernelInfo&) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    if (x.rank() < 2 || x.dim(-1) != x.dim(-2))
      ctx.fail("X must be [*, M, M], got ", shape_to_string(x.shape()));
    const int64_t m = x.dim(-1);
    Shape out_shape(x.shape().begin(), x.shape().end() - 2);
    Tensor& y = ctx.allocate_output(0, out_shape, x.dtype());
    const int64_t batches = y.numel();
    visit_dtype(x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      if constexpr (std::is_floating_point_v<T> || is_half_v<T>) {
        const T* xs = x.data<T>();
        T* out = y.data<T>();
        ctx.parallel_for(batches, 16, [&](int64_t begin, int64_t end) {
          std::vector<double> a(static_cast<size_t>(m * m));
          for (int64_t b = begin; b < end; ++b) {
            for (int64_t i = 0; i < m * m; ++i) a[i] = load_as<double>(xs[b * m * m + i]);
            out[b] = store_as<T>(static_cast<compute_t<T>>(determinant(a, m)));
          }
        });
      } else {
        ctx.fail("X must be floating point, got ", dtype_name(x.dtype()));
      }
    });
  }
};

DPRUN_REGISTER_KERNEL({.op_type = "Det",
                       .since = 11,
                       .dtypes = {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16},
                       .factory = make_kernel<DetKernel>});

}  // namespace
}  // namespace dprun

// The ops' facts (engine/op_facts.h): output types, shapes, 16-bit and layout policy.
namespace dprun {
namespace {
DPRUN_REGISTER_OP_FACTS({.op_type = "Det"});

}  // namespace
}  // namespace dprun
