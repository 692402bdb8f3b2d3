// The compute of the CUDA Range (defined in ops/array/range_cuda_def.cpp; float32/64, int16/32/64,
// the ONNX types): the output's length depends on the scalar inputs, so the CPU kernel's arguments
// (ops/array/range.h) are read on the host, from the plan's copy when they are constants; the
// device computes each element as the CPU does (this file is compiled without fused multiply-add,
// so floats round alike).
#include "ops/array/range.h"
#include "ops/array/range_types.h"
#include "ops/cuda/defs/cuda_compute.h"
#include "ops/cuda/elementwise.cuh"

namespace dprun::cuda_ew {
namespace {

template <class T>
__global__ void range_kernel(T* __restrict__ y, T start, T delta, int64_t n) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    y[i] = range_element(start, delta, i);
}

class RangeCuda : public OpKernel {
 public:
  using Types = RangeTypes;
  explicit RangeCuda(const KernelInfo& info) : params_(info) {}

  void compute(KernelContext& ctx) const override {
    const DType dtype = params_.dtype(ctx);
    dispatch(Types{}, dtype, ctx, [&](auto tag) {
      using T = decltype(tag);
      const RangeArgs<T> a = params_.args<T>(ctx);
      Tensor& y = ctx.allocate_output(0, {a.length}, dtype);
      if (a.length == 0) return;
      range_kernel<T><<<blocks_for(a.length), kThreads, 0, stream_of(ctx)>>>(y.data<T>(), a.start,
                                                                             a.delta, a.length);
      check_launch(ctx);
    });
  }

 private:
  RangeParams params_;
};

DPRUN_CUDA_COMPUTE("Range", make_kernel<RangeCuda>);

}  // namespace
}  // namespace dprun::cuda_ew
