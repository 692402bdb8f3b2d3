// The compute of Clip on CUDA (defined in ops/elementwise/clip_cuda_def.cpp), running the CPU
// kernel's math (ops/math/clip.h) with its arguments (ops/elementwise/clip.h): min/max attributes
// before opset 11, optional scalar inputs from 11. A bound input is passed to the device kernel as
// a pointer and read there, so the host never waits for it, whether it is a constant (a Constant
// node's device copy, an initializer) or computed by earlier GPU work; only its dtype and size are
// checked on the host.
#include <limits>

#include "ops/cuda/elementwise.cuh"
#include "ops/elementwise/clip.h"
#include "ops/math/clip.h"

namespace dprun::cuda_ew {
namespace {

/// y = clip(x, lo, hi), where a non-null lo_p / hi_p (one device element) replaces lo / hi.
template <class T>
__global__ void clip_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t n, T lo, T hi,
                            const T* lo_p, const T* hi_p) {
  const T l = lo_p ? *lo_p : lo, h = hi_p ? *hi_p : hi;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    y[i] = math::clip(x[i], l, h);
}

class ClipCuda : public OpKernel {
 public:
  using Types = NumericTypes;
  explicit ClipCuda(const KernelInfo& info) : params_(info) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    Tensor& y = ctx.allocate_output(0, x.shape(), x.dtype());
    dispatch(Types{}, x.dtype(), ctx, [&](auto tag) {
      using T = decltype(tag);
      T lo = std::numeric_limits<T>::lowest(), hi = std::numeric_limits<T>::max();
      const T *lo_p = nullptr, *hi_p = nullptr;
      if (params_.from_attributes()) {
        if constexpr (std::is_floating_point_v<T>) {
          lo = static_cast<T>(params_.min_attr());
          hi = static_cast<T>(params_.max_attr());
        } else {
          // Clip before opset 11 is float-only; the CPU kernel's message.
          ctx.fail("input dtype ", dtype_name(x.dtype()), " is not supported by this operator");
        }
      } else {
        if (const Tensor* t = ctx.optional_input(1)) {
          ClipParams::check_bound(ctx, *t, x.dtype(), "min");
          lo_p = t->data<T>();
        }
        if (const Tensor* t = ctx.optional_input(2)) {
          ClipParams::check_bound(ctx, *t, x.dtype(), "max");
          hi_p = t->data<T>();
        }
      }
      const int64_t n = x.numel();
      if (n == 0) return;
      clip_kernel<T><<<blocks_for(n), kThreads, 0, stream_of(ctx)>>>(x.data<T>(), y.data<T>(), n,
                                                                     lo, hi, lo_p, hi_p);
      check_launch(ctx);
    });
  }

 private:
  ClipParams params_;
};

DPRUN_CUDA_COMPUTE("Clip", make_kernel<ClipCuda>);

}  // namespace
}  // namespace dprun::cuda_ew
