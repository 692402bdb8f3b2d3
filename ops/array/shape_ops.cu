// The compute of the CUDA Shape, Size and ConstantOfShape (defined in
// ops/array/shape_ops_cuda_def.cpp). Shape and Size read only the input's metadata, so its data
// stays on the GPU (a host fallback would copy the whole input to the host to read its dims). Their
// few int64 values are written by a kernel that receives them by value: the launch captures its
// arguments, so no host buffer has to outlive an asynchronous copy and nothing waits.
// ConstantOfShape fills its output the same way with the value's bits. Arguments and messages are
// the CPU kernels' (ops/array/shape_ops.h).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>

#include "engine/backends/cuda/cuda_check.h"
#include "engine/backends/cuda/cuda_execution_context.h"
#include "ops/array/shape_ops.h"
#include "ops/cuda/defs/cuda_compute.h"
#include "ops/cuda/elementwise.cuh"

namespace dprun {
namespace {

/// Up to kChunk values for one launch; longer lists take several launches.
constexpr int kChunk = 16;
struct Int64Chunk {
  int64_t values[kChunk];
};

__global__ void write_int64_kernel(int64_t* y, Int64Chunk chunk, int n) {
  const int i = static_cast<int>(threadIdx.x);
  if (i < n) y[i] = chunk.values[i];
}

/// Writes `values` to the device array `y` (values.size() elements) on ctx's stream.
void write_int64s(const KernelContext& ctx, int64_t* y, const std::vector<int64_t>& values) {
  const cudaStream_t stream = CudaExecutionContext::of(ctx.execution()).stream();
  for (size_t begin = 0; begin < values.size(); begin += kChunk) {
    const size_t n = std::min<size_t>(kChunk, values.size() - begin);
    Int64Chunk chunk{};
    std::copy_n(values.begin() + static_cast<std::ptrdiff_t>(begin), n, chunk.values);
    write_int64_kernel<<<1, kChunk, 0, stream>>>(y + begin, chunk, static_cast<int>(n));
    cuda_check(cudaGetLastError(), ctx.node().describe(), ": write_int64_kernel launch");
  }
}

template <class U>
__global__ void fill_kernel(U* y, U value, int64_t total) {
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; t < total;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    y[t] = value;
  }
}

class ShapeCuda : public OpKernel {
 public:
  explicit ShapeCuda(const KernelInfo& info) : params_(info) {}

  void compute(KernelContext& ctx) const override {
    const std::vector<int64_t> dims = params_.listed(ctx.input(0).shape());
    Tensor& y = ctx.allocate_output(0, {static_cast<int64_t>(dims.size())}, DType::Int64);
    write_int64s(ctx, y.data<int64_t>(), dims);
  }

 private:
  ShapeParams params_;
};

class SizeCuda : public OpKernel {
 public:
  explicit SizeCuda(const KernelInfo&) {}

  void compute(KernelContext& ctx) const override {
    Tensor& y = ctx.allocate_output(0, {}, DType::Int64);
    write_int64s(ctx, y.data<int64_t>(), {ctx.input(0).numel()});
  }
};

class ConstantOfShapeCuda : public OpKernel {
 public:
  explicit ConstantOfShapeCuda(const KernelInfo& info) : params_(info) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& value = params_.value();
    Tensor& y = ctx.allocate_output(0, params_.shape(ctx), value.dtype());
    if (y.numel() == 0) return;
    const cudaStream_t stream = CudaExecutionContext::of(ctx.execution()).stream();
    const unsigned blocks = cuda_ew::blocks_for(y.numel());
    visit_element_size(dtype_size(value.dtype()), [&](auto tag) {
      using U = decltype(tag);
      U bits;
      std::memcpy(&bits, value.raw_data(), sizeof(U));
      fill_kernel<U><<<blocks, cuda_ew::kThreads, 0, stream>>>(static_cast<U*>(y.raw_data()), bits,
                                                               y.numel());
    });
    cuda_check(cudaGetLastError(), ctx.node().describe(), ": fill_kernel launch");
  }

 private:
  ConstantOfShapeParams params_;
};

DPRUN_CUDA_COMPUTE("Shape", make_kernel<ShapeCuda>);
DPRUN_CUDA_COMPUTE("Size", make_kernel<SizeCuda>);
DPRUN_CUDA_COMPUTE("ConstantOfShape", make_kernel<ConstantOfShapeCuda>);

}  // namespace
}  // namespace dprun
