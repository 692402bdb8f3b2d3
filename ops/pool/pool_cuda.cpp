// The compute of the CUDA MaxPool (the Y output only), AveragePool, GlobalMaxPool and
// GlobalAveragePool (NCHW; defined in ops/pool/pool_cuda_def.cpp) with cuDNN pooling; 1-D windows
// are lifted to 2-D, up to 3 spatial dims. float32, float16 and bfloat16 (pooled in float by cuDNN,
// each result rounded once).
//
// The output shape is the CPU kernel's (WindowAttrs::resolve: pads, auto_pad, ceil_mode, the
// last window dropped when it would start in the end padding). cuDNN pads both ends alike and
// rounds the output size down, so:
//  - direct: when the pads agree at both ends, are smaller than the window, and cuDNN's output
//    size is the node's, cuDNN pools with its own padding (its include/exclude-padding average
//    then counts exactly as ONNX's count_include_pad does);
//  - otherwise (asymmetric pads, SAME_* with an odd total, ceil_mode adding a window): X is
//    copied into a tensor padded explicitly so that every window lies inside it, with
//    -FLT_MAX (what the CPU kernel's max starts from) or 0 around it, and pooled without
//    padding. An average there divides by the full window size; where ONNX counts fewer
//    elements (count_include_pad=0: those inside X; 1: those inside the declared pads), the
//    result is multiplied by window size / count, a per-position factor computed on the host
//    once per input shape and device and kept on the GPU. Such averages are pooled in float32
//    (a 16-bit X widened first) and rounded once, after the scaling (average_pool_scale_cuda.h).
// Declined by the definition (the node runs on the host): MaxPool asked for its Indices output, any
// dilation other than 1 (cuDNN pooling has none), more than 3 spatial dims or an unknown rank, and
// inputs known to be of other dtypes.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cfloat>
#include <functional>
#include <memory>
#include <numeric>
#include <vector>

#include "engine/backend.h"
#include "engine/backends/cuda/cuda_check.h"
#include "engine/backends/cuda/cuda_execution_context.h"
#include "ops/common/shape_cache.h"
#include "ops/cuda/cudnn_util.h"
#include "ops/cuda/defs/cuda_compute.h"
#include "ops/pool/average_pool_scale_cuda.h"
#include "ops/pool/pool_types.h"

namespace dprun {
namespace {

using cuda_pool::kPoolTypes;

/// Whether `types` holds `dtype`.
bool takes(const std::vector<DType>& types, DType dtype) {
  return std::find(types.begin(), types.end(), dtype) != types.end();
}

/// y = pool(x) with the given descriptors (their data type is x's and y's).
void pool_forward(CudaExecutionContext& cuda, const cudnn::PoolDesc& pool, const void* x,
                  const cudnn::TensorDesc& x_desc, void* y, const cudnn::TensorDesc& y_desc,
                  const char* op) {
  const float one = 1.f, zero = 0.f;
  cudnn_check(cudnnPoolingForward(cuda.cudnn(), pool, &one, x_desc, x, &zero, y_desc, y), op,
              ": cudnnPoolingForward");
}

template <bool kMax>
class PoolCudnn : public OpKernel {
 public:
  explicit PoolCudnn(const KernelInfo& info)
      : base_(info.node),
        count_include_pad_(!kMax && info.node.attr_int("count_include_pad", 0) != 0) {}

  void compute(KernelContext& ctx) const override {
    const char* op = kMax ? "MaxPool" : "AveragePool";
    const Tensor& x = ctx.input(0);
    if (!takes(kPoolTypes, x.dtype()))
      ctx.fail("expects float32, float16 or bfloat16, got ", x.describe());
    Shape out_shape;
    const WindowGeometry g = cudnn::lift_1d(base_.geometry(ctx, x, out_shape));
    Tensor& y = ctx.allocate_output(0, out_shape, x.dtype());
    const cudnnDataType_t type = cudnn::data_type_of(x.dtype());
    if (y.numel() == 0) return;
    CudaExecutionContext& cuda = CudaExecutionContext::of(ctx.execution());
    const cudnnPoolingMode_t mode = kMax ? CUDNN_POOLING_MAX
                                    : count_include_pad_
                                        ? CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING
                                        : CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING;
    const std::vector<int64_t> x_dims = cudnn::nc_dims(x.dim(0), x.dim(1), g.in),
                               y_dims = cudnn::nc_dims(x.dim(0), x.dim(1), g.out);
    const cudnn::TensorDesc y_desc(ctx, y_dims, {}, type);
    bool direct = cudnn::symmetric_pads(g) && x.numel() > 0;
    for (size_t i = 0; i < g.rank(); ++i) {
      const int64_t span = g.in[i] + 2 * g.pads_begin[i] - g.kernel[i];
      if (g.pads_begin[i] >= g.kernel[i] || span < 0 || span / g.strides[i] + 1 != g.out[i])
        direct = false;
    }
    if (direct) {
      const cudnn::PoolDesc pool(ctx, mode, g.kernel, g.pads_begin, g.strides);
      pool_forward(cuda, pool, x.raw_data(), cudnn::TensorDesc(ctx, x_dims, {}, type), y.raw_data(),
                   y_desc, op);
      return;
    }
    // Explicit padding: enough at the end for the last window, at least none.
    std::vector<int64_t> after(g.rank());
    for (size_t i = 0; i < g.rank(); ++i)
      after[i] = std::max<int64_t>(
          0, (g.out[i] - 1) * g.strides[i] + g.kernel[i] - g.in[i] - g.pads_begin[i]);
    const Tensor padded =
        cudnn::pad_spatial(cuda, ctx, x, x_dims, g.pads_begin, after, kMax ? -FLT_MAX : 0.f);
    const std::vector<int64_t> padded_dims(padded.shape().begin(), padded.shape().end());
    const cudnn::PoolDesc pool(
        ctx, kMax ? CUDNN_POOLING_MAX : CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING, g.kernel,
        std::vector<int64_t>(g.rank(), 0), g.strides);
    const cudnn::TensorDesc padded_desc(ctx, padded_dims, {}, type);
    std::shared_ptr<const Tensor> factor;
    if (!kMax) {
      std::vector<int64_t> key = g.in;
      key.push_back(ctx.device().index);
      // Runs on other streams may still have reads of a cached factor queued: dropping the
      // cache waits for the device, or the allocator could hand a factor's memory out under them.
      factor = factors_.get(
          key, [&] { return count_factor(ctx, g); },
          [&] { backend_for(ctx.device()).synchronize(ctx.device()); });
    }
    if (!factor || factor->numel() == 0) {
      pool_forward(cuda, pool, padded.raw_data(), padded_desc, y.raw_data(), y_desc, op);
      return;
    }
    // Averages to scale are pooled in float32 and rounded once, after the scaling.
    const Tensor wide = x.dtype() == DType::Float32 ? padded : widened_to_float32(ctx, padded);
    Tensor sum = Tensor::empty(y.shape(), DType::Float32, ctx.device());
    pool_forward(cuda, pool, wide.data<float>(), cudnn::TensorDesc(ctx, padded_dims),
                 sum.data<float>(), cudnn::TensorDesc(ctx, y_dims), op);
    scale_positions_into(ctx, sum.data<float>(), factor->data<float>(), factor->numel(), y);
  }

 private:
  /// Per output position (spatial dims only), window size / the count ONNX divides by; an
  /// empty tensor when that is 1 everywhere. Uploaded with a synchronous copy, so any stream
  /// may read it once it is cached.
  std::shared_ptr<const Tensor> count_factor(const KernelContext& ctx,
                                             const WindowGeometry& g) const {
    // Windows are boxes, so a count is the product of per-dim counts.
    std::vector<std::vector<int64_t>> counts(g.rank());
    bool uniform = true;
    for (size_t i = 0; i < g.rank(); ++i) {
      const int64_t lo = count_include_pad_ ? -g.pads_begin[i] : 0,
                    hi = g.in[i] + (count_include_pad_ ? g.pads_end[i] : 0);
      for (int64_t o = 0; o < g.out[i]; ++o) {
        const int64_t start = o * g.strides[i] - g.pads_begin[i];
        const int64_t n =
            std::max<int64_t>(0, std::min(hi, start + g.kernel[i]) - std::max(lo, start));
        counts[i].push_back(n);
        uniform = uniform && n == g.kernel[i];
      }
    }
    if (uniform) return std::make_shared<Tensor>(Tensor::empty({0}, DType::Float32, ctx.device()));
    const int64_t window =
        std::accumulate(g.kernel.begin(), g.kernel.end(), int64_t{1}, std::multiplies<>());
    const int64_t positions =
        std::accumulate(g.out.begin(), g.out.end(), int64_t{1}, std::multiplies<>());
    std::vector<float> factor(static_cast<size_t>(positions));
    for (int64_t p = 0; p < positions; ++p) {
      int64_t rest = p, count = 1;
      for (size_t i = g.rank(); i-- > 0;) {
        count *= counts[i][static_cast<size_t>(rest % g.out[i])];
        rest /= g.out[i];
      }
      // A window wholly outside what is counted averages nothing: 0, as on the CPU.
      factor[static_cast<size_t>(p)] =
          count > 0 ? static_cast<float>(static_cast<double>(window) / static_cast<double>(count))
                    : 0.f;
    }
    auto on_device = std::make_shared<Tensor>(
        Tensor::from_vector<float>(Shape(g.out.begin(), g.out.end()), factor).to(ctx.device()));
    // Cached for every later run, whatever its stream: the copy must be complete first.
    ctx.execution().synchronize();
    return on_device;
  }

  PoolBase base_;
  bool count_include_pad_ = false;
  ShapeCache<Tensor> factors_;
};

/// GlobalMaxPool / GlobalAveragePool: one window over all spatial elements of each plane, X
/// viewed as [N, C, S, 1].
template <bool kMax>
class GlobalPoolCudnn : public OpKernel {
 public:
  explicit GlobalPoolCudnn(const KernelInfo&) {}

  void compute(KernelContext& ctx) const override {
    const char* op = kMax ? "GlobalMaxPool" : "GlobalAveragePool";
    const Tensor& x = ctx.input(0);
    if (!takes(kPoolTypes, x.dtype()))
      ctx.fail("expects float32, float16 or bfloat16, got ", x.describe());
    if (x.rank() < 3)
      ctx.fail("X must have rank >= 3 (N, C, spatial...), got ", shape_to_string(x.shape()));
    Shape out_shape(x.shape().size(), 1);
    out_shape[0] = x.dim(0);
    out_shape[1] = x.dim(1);
    Tensor& y = ctx.allocate_output(0, out_shape, x.dtype());
    if (y.numel() == 0) return;
    const int64_t s = x.numel() / y.numel();
    CudaExecutionContext& cuda = CudaExecutionContext::of(ctx.execution());
    if (s == 0) {
      if (kMax) ctx.fail("GlobalMaxPool over an empty input");
      cuda_check(cudaMemsetAsync(y.raw_data(), 0, y.nbytes(), cuda.stream()), op,
                 ": cudaMemsetAsync");
      return;
    }
    const cudnn::PoolDesc pool(
        ctx, kMax ? CUDNN_POOLING_MAX : CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING, {s, 1}, {0, 0},
        {1, 1});
    const cudnnDataType_t type = cudnn::data_type_of(x.dtype());
    pool_forward(cuda, pool, x.raw_data(),
                 cudnn::TensorDesc(ctx, {x.dim(0), x.dim(1), s, 1}, {}, type), y.raw_data(),
                 cudnn::TensorDesc(ctx, {x.dim(0), x.dim(1), 1, 1}, {}, type), op);
  }
};

DPRUN_CUDA_COMPUTE("MaxPool/cudnn", make_kernel<PoolCudnn<true>>);
DPRUN_CUDA_COMPUTE("AveragePool", make_kernel<PoolCudnn<false>>);
DPRUN_CUDA_COMPUTE("GlobalMaxPool", make_kernel<GlobalPoolCudnn<true>>);
DPRUN_CUDA_COMPUTE("GlobalAveragePool", make_kernel<GlobalPoolCudnn<false>>);

}  // namespace
}  // namespace dprun
