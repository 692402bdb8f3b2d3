// SoftmaxGrad and LogSoftmaxGrad (rewrite domain): the input gradients of Softmax and LogSoftmax
// along one axis as their rules (softmax_grad.cpp, log_softmax_grad.cpp) write them, in one pass
// over each row instead of four nodes (the nodes' contract: engine/rewrites/softmax_grad_fusion.h):
//   SoftmaxGrad(dY, Y)    = Y * (dY - sum(dY * Y))
//   LogSoftmaxGrad(dY, Y) = dY - exp(Y) * sum(dY)
// Each row's sum is accumulated in double; its row stays in cache for the second loop. The dtype
// is read from Y, a forward value whose type is declared (dY's often is not), so that a 16-bit
// chain is left unfused.
#include <algorithm>
#include <vector>

#include "engine/kernel.h"
#include "engine/rewrites/rewrite_domain.h"
#include "engine/simd_clones.h"
#include "ops/common/reduce_common.h"
#include "ops/math/unary_functors.h"

namespace dprun {
namespace {

enum class Kind { Softmax, LogSoftmax };

// The row's sum: of dY * Y (Softmax) or of dY (LogSoftmax).
template <Kind K, class T>
inline double row_sum(const T* dy, const T* y, int64_t D) {
  double sum = 0;
  if constexpr (K == Kind::Softmax) {
#pragma omp simd reduction(+ : sum)
    for (int64_t d = 0; d < D; ++d) sum += static_cast<double>(dy[d]) * static_cast<double>(y[d]);
  } else {
#pragma omp simd reduction(+ : sum)
    for (int64_t d = 0; d < D; ++d) sum += static_cast<double>(dy[d]);
  }
  return sum;
}

template <Kind K, class T>
inline T grad_of(T dy, T y, T sum) {
  if constexpr (K == Kind::Softmax)
    return y * (dy - sum);
  else
    return dy - math::exp_of(y) * sum;
}

/// One contiguous row, compiled per instruction set. dx may be dy or y.
template <Kind K, class T>
DPRUN_SIMD_CLONES void grad_row(const T* dy, const T* y, T* dx, int64_t D) {
  const auto sum = static_cast<T>(row_sum<K>(dy, y, D));
  for (int64_t d = 0; d < D; ++d) dx[d] = grad_of<K>(dy[d], y[d], sum);
}

/// A block of `len` columns of the [D, inner] slab at dy, y, dx (the axis of stride `inner`).
template <Kind K, class T>
void grad_block(const T* dy, const T* y, T* dx, int64_t D, int64_t inner, int64_t len,
                double* acc) {
  std::fill(acc, acc + len, 0.0);
  for (int64_t d = 0; d < D; ++d)
    for (int64_t i = 0; i < len; ++i) {
      const int64_t k = d * inner + i;
      acc[i] += K == Kind::Softmax ? static_cast<double>(dy[k]) * static_cast<double>(y[k])
                                   : static_cast<double>(dy[k]);
    }
  for (int64_t d = 0; d < D; ++d)
    for (int64_t i = 0; i < len; ++i) {
      const int64_t k = d * inner + i;
      dx[k] = grad_of<K>(dy[k], y[k], static_cast<T>(acc[i]));
    }
}

template <Kind K>
class SoftmaxGradKernel : public OpKernel {
 public:
  explicit SoftmaxGradKernel(const KernelInfo& info) : axis_(info.node.attr_int("axis", -1)) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& dy = ctx.input(0);
    const Tensor& y = ctx.input(1);
    if (dy.shape() != y.shape() || dy.dtype() != y.dtype())
      ctx.fail("dY ", shape_to_string(dy.shape()), " is not shaped and typed like Y ",
               shape_to_string(y.shape()));
    const auto rank = static_cast<int64_t>(y.rank());
    const int64_t a = axis_ < 0 ? axis_ + rank : axis_;
    if (a < 0 || a >= rank) ctx.fail("axis ", axis_, " is out of range for rank ", rank);
    const int64_t outer = dims_product(y.shape(), 0, a), D = y.shape()[static_cast<size_t>(a)],
                  inner = dims_product(y.shape(), a + 1, rank);
    // Each element is read before its own position is written: dX may take dY's or Y's memory.
    const size_t reused = ctx.input_reusable(0, y.shape(), y.dtype()) ? 0 : 1;
    Tensor& dx = ctx.allocate_output_reusing(0, reused, y.shape(), y.dtype());
    if (y.numel() == 0) return;
    visit_dtype_among<float, double>(y.dtype(), [&](auto tag) {
      using T = decltype(tag);
      run<T>(ctx, dy.data<T>(), y.data<T>(), dx.data<T>(), outer, D, inner);
    });
  }

 private:
  template <class T>
  static void run(KernelContext& ctx, const T* dy, const T* y, T* dx, int64_t outer, int64_t D,
                  int64_t inner) {
    if (inner == 1) {
      ctx.parallel_for(outer, std::max<int64_t>(1, 4096 / std::max<int64_t>(D, 1)),
                       [&](int64_t r0, int64_t r1) {
                         for (int64_t r = r0; r < r1; ++r)
                           grad_row<K, T>(dy + r * D, y + r * D, dx + r * D, D);
                       });
      return;
    }
    constexpr int64_t kBlock = 256;
    const int64_t blocks = (inner + kBlock - 1) / kBlock;
    ctx.parallel_for(outer * blocks, std::max<int64_t>(1, 4096 / std::max<int64_t>(D * kBlock, 1)),
                     [&](int64_t t0, int64_t t1) {
                       std::vector<double> acc(kBlock);
                       for (int64_t t = t0; t < t1; ++t) {
                         const int64_t o = t / blocks, i0 = (t % blocks) * kBlock;
                         const int64_t at = o * D * inner + i0;
                         grad_block<K, T>(dy + at, y + at, dx + at, D, inner,
                                          std::min(kBlock, inner - i0), acc.data());
                       }
                     });
  }

  int64_t axis_;
};

DPRUN_REGISTER_KERNEL({.domain = kRewriteDomain,
                       .op_type = "SoftmaxGrad",
                       .dtypes = {DType::Float32, DType::Float64},
                       .dtype_input = 1,
                       .factory = make_kernel<SoftmaxGradKernel<Kind::Softmax>>});
DPRUN_REGISTER_KERNEL({.domain = kRewriteDomain,
                       .op_type = "LogSoftmaxGrad",
                       .dtypes = {DType::Float32, DType::Float64},
                       .dtype_input = 1,
                       .factory = make_kernel<SoftmaxGradKernel<Kind::LogSoftmax>>});

}  // namespace
}  // namespace dprun
