// The compute of the CUDA Gather (defined in ops/array/gather_cuda_def.cpp), for every dtype
// (elements move as unsigned integers of their size) and int32 or int64 indices. Out-of-range
// indices fail like the CPU kernel, with its message, before anything is launched: the indices are
// validated on the host (read_indices). That costs a device-to-host copy of the indices, which
// waits for the work producing them, but it keeps the error synchronous with the node that caused
// it; a device-side error flag would only be seen after the next synchronisation, by then
// attributed to no node. Indices that are a constant of the plan (an initializer) are validated
// from the plan's host copy, without that wait. The kernel reads the indices from device memory and
// adds the dim to negatives.
#include <cuda_runtime_api.h>

#include <algorithm>

#include "engine/backends/cuda/cuda_check.h"
#include "engine/backends/cuda/cuda_execution_context.h"
#include "ops/array/gather.h"
#include "ops/cuda/defs/cuda_compute.h"
#include "ops/cuda/elementwise.cuh"

namespace dprun {
namespace {

/// Output element t of [outer, n, inner] is data element (o * dim + index[j]) * inner + i.
template <class U, class I>
__global__ void gather_kernel(const U* data, const I* indices, U* y, int64_t n, int64_t dim,
                              int64_t inner, int64_t total) {
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; t < total;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = t % inner;
    const int64_t row = t / inner;
    const int64_t j = row % n;
    const int64_t o = row / n;
    int64_t index = static_cast<int64_t>(indices[j]);
    if (index < 0) index += dim;
    y[t] = data[(o * dim + index) * inner + i];
  }
}

class GatherCuda : public OpKernel {
 public:
  explicit GatherCuda(const KernelInfo& info) : axis_(info.node.attr_int("axis", 0)) {
    if (auto it = info.constant_inputs.find(1); it != info.constant_inputs.end())
      constant_indices_ = it->second;
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& data = ctx.input(0);
    const Tensor& indices = ctx.input(1);
    const GatherLayout g = gather_layout(data.shape(), indices.shape(), axis_, ctx);
    // Validation only: the values themselves are read on the device.
    read_indices(constant_indices_.defined() ? constant_indices_ : indices, g.dim, ctx, "index");
    Tensor& y = ctx.allocate_output(0, g.out_shape, data.dtype());
    if (y.numel() == 0) return;
    const cudaStream_t stream = CudaExecutionContext::of(ctx.execution()).stream();
    const unsigned blocks = cuda_ew::blocks_for(y.numel());
    visit_element_size(dtype_size(data.dtype()), [&](auto tag) {
      using U = decltype(tag);
      auto launch = [&](auto index_tag) {
        using I = decltype(index_tag);
        gather_kernel<U, I><<<blocks, cuda_ew::kThreads, 0, stream>>>(
            static_cast<const U*>(data.raw_data()), static_cast<const I*>(indices.raw_data()),
            static_cast<U*>(y.raw_data()), indices.numel(), g.dim, g.inner, y.numel());
      };
      if (indices.dtype() == DType::Int32)
        launch(int32_t{});
      else
        launch(int64_t{});
    });
    cuda_check(cudaGetLastError(), ctx.node().describe(), ": gather_kernel launch");
  }

 private:
  int64_t axis_;
  Tensor constant_indices_;  // the plan's host copy of constant indices, else undefined
};

DPRUN_CUDA_COMPUTE("Gather", make_kernel<GatherCuda>);

}  // namespace
}  // namespace dprun
