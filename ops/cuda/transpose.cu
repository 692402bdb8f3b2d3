// Transpose on CUDA, for every dtype: elements are moved as unsigned integers of their size.
// Each thread computes one output element's source offset from its index. Dimensions of size
// 1 are dropped and neighbouring output dimensions that are also neighbours in the input are
// merged first, so a permutation that keeps the order becomes one device-to-device copy and
// inputs of any rank that reduce to kMaxRank dimensions are accepted.
#include <cuda_runtime_api.h>

#include <algorithm>

#include "engine/backends/cuda/cuda_check.h"
#include "engine/backends/cuda/cuda_execution_context.h"
#include "ops/cpu/data_movement.h"
#include "ops/cuda/transpose.h"

namespace dprun {
namespace {

constexpr int kMaxRank = 8;

/// The output's dims and, for each, the input element stride it walks (0 repeats the input
/// along that dim).
struct PermutedLayout {
  int rank = 0;
  int64_t dims[kMaxRank];
  int64_t in_strides[kMaxRank];
};

template <class T>
__global__ void transpose_kernel(const T* x, T* y, PermutedLayout layout, int64_t total) {
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; t < total;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t rest = t, offset = 0;
    for (int k = layout.rank - 1; k >= 0; --k) {
      offset += rest % layout.dims[k] * layout.in_strides[k];
      rest /= layout.dims[k];
    }
    y[t] = x[offset];
  }
}

class TransposeCuda : public OpKernel {
 public:
  explicit TransposeCuda(const KernelInfo& info) {
    if (info.node.has_attr("perm")) perm_ = info.node.attr_ints("perm");
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    const std::vector<int64_t> perm = transpose_perm(perm_, static_cast<size_t>(x.rank()), ctx);
    Shape out_shape;
    for (int64_t p : perm) out_shape.push_back(x.shape()[static_cast<size_t>(p)]);
    cuda_transpose_into(ctx, x, perm, ctx.allocate_output(0, out_shape, x.dtype()));
  }

 private:
  std::vector<int64_t> perm_;
};

}  // namespace

void cuda_transpose_into(const KernelContext& ctx, const Tensor& x,
                         const std::vector<int64_t>& perm, Tensor& y) {
  const std::vector<int64_t> in_strides = contiguous_strides(x.shape());
  std::vector<int64_t> dims, strides;  // the simplified layout, outermost first
  for (int64_t p : perm) {
    const int64_t size = x.shape()[static_cast<size_t>(p)];
    const int64_t stride = in_strides[static_cast<size_t>(p)];
    if (size == 1) continue;
    if (!dims.empty() && strides.back() == stride * size) {
      dims.back() *= size;
      strides.back() = stride;
    } else {
      dims.push_back(size);
      strides.push_back(stride);
    }
  }
  if (y.numel() == 0) return;
  const cudaStream_t stream = CudaExecutionContext::of(ctx.execution()).stream();
  if (dims.empty() || (dims.size() == 1 && strides[0] == 1)) {
    cuda_check(
        cudaMemcpyAsync(y.raw_data(), x.raw_data(), y.nbytes(), cudaMemcpyDeviceToDevice, stream),
        "Transpose: cudaMemcpyAsync");
    return;
  }
  if (dims.size() > kMaxRank)
    ctx.fail("supports up to ", kMaxRank, " dimensions after merging, ", shape_to_string(x.shape()),
             " with perm ", shape_to_string(perm), " has ", dims.size());
  cuda_gather_strided(ctx, x, dims, strides, y);
}

void cuda_gather_strided(const KernelContext& ctx, const Tensor& x,
                         const std::vector<int64_t>& dims, const std::vector<int64_t>& in_strides,
                         Tensor& y) {
  if (y.numel() == 0) return;
  if (dims.size() > kMaxRank)
    ctx.fail("gathers over at most ", kMaxRank, " dimensions on CUDA, got ", shape_to_string(dims));
  PermutedLayout layout;
  layout.rank = static_cast<int>(dims.size());
  std::copy(dims.begin(), dims.end(), layout.dims);
  std::copy(in_strides.begin(), in_strides.end(), layout.in_strides);
  constexpr int kThreads = 256;
  const auto blocks =
      static_cast<unsigned>(std::min<int64_t>((y.numel() + kThreads - 1) / kThreads, 1 << 20));
  const cudaStream_t stream = CudaExecutionContext::of(ctx.execution()).stream();
  visit_element_size(dtype_size(x.dtype()), [&](auto tag) {
    using U = decltype(tag);
    transpose_kernel<U><<<blocks, kThreads, 0, stream>>>(
        static_cast<const U*>(x.raw_data()), static_cast<U*>(y.raw_data()), layout, y.numel());
  });
  cuda_check(cudaGetLastError(), "transpose_kernel launch");
}

namespace {

DPRUN_REGISTER_KERNEL({.op_type = "Transpose",
                       .since = 1,
                       .device = DeviceType::CUDA,
                       .factory = make_kernel<TransposeCuda>});

}  // namespace
}  // namespace dprun
