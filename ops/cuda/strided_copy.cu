#include "ops/cuda/strided_copy.h"

#include <cuda_runtime_api.h>

#include <algorithm>

#include "engine/backends/cuda/cuda_check.h"
#include "engine/backends/cuda/cuda_execution_context.h"
#include "ops/cuda/elementwise.cuh"

namespace dprun {
namespace {

/// The merged layout, passed to the kernel by value (no host memory is read after launch).
struct CopyLayout {
  int rank = 0;
  int64_t dims[kMaxStridedCopyRank];
  int64_t src_strides[kMaxStridedCopyRank];
  int64_t dst_strides[kMaxStridedCopyRank];
};

template <class U>
__global__ void strided_copy_kernel(const U* src, U* dst, CopyLayout layout, int64_t total) {
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; t < total;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t rest = t, from = 0, to = 0;
    for (int k = layout.rank - 1; k >= 0; --k) {
      const int64_t i = rest % layout.dims[k];
      rest /= layout.dims[k];
      from += i * layout.src_strides[k];
      to += i * layout.dst_strides[k];
    }
    dst[to] = src[from];
  }
}

}  // namespace

void cuda_strided_copy(const KernelContext& ctx, const Shape& shape, const void* src,
                       int64_t src_offset, const std::vector<int64_t>& src_strides, void* dst,
                       int64_t dst_offset, const std::vector<int64_t>& dst_strides,
                       size_t elem_size) {
  DPRUN_CHECK(shape.size() == src_strides.size() && shape.size() == dst_strides.size(),
              "cuda_strided_copy: rank mismatch");
  const int64_t total = shape_numel(shape);
  if (total == 0) return;
  // Drop unit dims; merge a dim into its outer neighbour when both layouts step over it
  // contiguously.
  std::vector<int64_t> dims, from, to;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    if (!dims.empty() && from.back() == src_strides[d] * shape[d] &&
        to.back() == dst_strides[d] * shape[d]) {
      dims.back() *= shape[d];
      from.back() = src_strides[d];
      to.back() = dst_strides[d];
    } else {
      dims.push_back(shape[d]);
      from.push_back(src_strides[d]);
      to.push_back(dst_strides[d]);
    }
  }
  const cudaStream_t stream = CudaExecutionContext::of(ctx.execution()).stream();
  const auto* src_bytes =
      static_cast<const char*>(src) + src_offset * static_cast<int64_t>(elem_size);
  auto* dst_bytes = static_cast<char*>(dst) + dst_offset * static_cast<int64_t>(elem_size);
  if (dims.empty() || (dims.size() == 1 && from[0] == 1 && to[0] == 1)) {
    cuda_check(cudaMemcpyAsync(dst_bytes, src_bytes, static_cast<size_t>(total) * elem_size,
                               cudaMemcpyDeviceToDevice, stream),
               ctx.node().describe(), ": cudaMemcpyAsync");
    return;
  }
  if (dims.size() > static_cast<size_t>(kMaxStridedCopyRank))
    ctx.fail("supports copies of up to ", kMaxStridedCopyRank, " dimensions after merging, ",
             shape_to_string(shape), " has ", dims.size());
  CopyLayout layout;
  layout.rank = static_cast<int>(dims.size());
  std::copy(dims.begin(), dims.end(), layout.dims);
  std::copy(from.begin(), from.end(), layout.src_strides);
  std::copy(to.begin(), to.end(), layout.dst_strides);
  const unsigned blocks = cuda_ew::blocks_for(total);
  visit_element_size(elem_size, [&](auto tag) {
    using U = decltype(tag);
    strided_copy_kernel<U><<<blocks, cuda_ew::kThreads, 0, stream>>>(
        reinterpret_cast<const U*>(src_bytes), reinterpret_cast<U*>(dst_bytes), layout, total);
  });
  cuda_check(cudaGetLastError(), ctx.node().describe(), ": strided_copy_kernel launch");
}

void cuda_view_copy(const KernelContext& ctx, const Tensor& x, const StridedView& view, Tensor& y) {
  cuda_strided_copy(ctx, view.shape, x.raw_data(), view.offset, view.strides, y.raw_data(), 0,
                    contiguous_strides(view.shape), dtype_size(x.dtype()));
}

}  // namespace dprun
