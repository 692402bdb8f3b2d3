// The compute of the CUDA Conv (NCHW; defined in ops/conv/conv_cuda_def.cpp) with cuDNN, in
// float32, float16 and bfloat16 (16-bit X, W and B, float32 sums on tensor cores, each result
// rounded once): 1-D (lifted to 2-D), 2-D and 3-D windows, groups, strides, dilations, explicit
// pads and auto_pad, optional bias B added with cudnnAddTensor (a 16-bit bias is added to the
// rounded product: a second rounding).
//
// cuDNN pads both ends of a dim alike. Where the node's pads differ between the ends (explicit
// asymmetric pads, or SAME_UPPER/SAME_LOWER with an odd total), the input is first copied into
// a zero-bordered tensor and convolved without padding: correct for every shape, so nothing is
// declined for its pads. Declined by the definition (the node runs on the host): more than 3
// spatial dims, a rank that no type or attribute tells, and inputs known to be of other dtypes.
//
// The forward algorithm is the fastest that cuDNN measures on the node's own data
// (cudnnFindConvolutionForwardAlgorithmEx, as ONNX Runtime's default EXHAUSTIVE search and
// PyTorch's cudnn.benchmark), once per input and weight shape and device, cached in the
// kernel; cuDNN's heuristic ranking where the search fails. The search gets a workspace of up
// to kSearchWorkspaceBytes (less where the GPU has less free). Without --allow-tf32 tensor-op
// (TF32) algorithms are skipped and the math type is FMA, so results match the CPU kernel
// within float rounding. Why search: with the heuristic ranking alone, ResNet-18's
// convolutions took 9.8 ms a step at batch 64 on an H200, against 7.5 ms for PyTorch's whole
// step (bench/README.md); the search itself has not yet run on a GPU.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <string>

#include "engine/backends/cuda/cuda_check.h"
#include "engine/backends/cuda/cuda_devices.h"
#include "engine/backends/cuda/cuda_execution_context.h"
#include "ops/common/shape_cache.h"
#include "ops/conv/conv_descriptors_cuda.h"
#include "ops/cuda/cudnn_util.h"
#include "ops/cuda/defs/cuda_compute.h"
#include "ops/input_dtypes.h"

namespace dprun {
namespace {

/// A chosen forward algorithm and the workspace it needs.
struct ConvAlgorithm {
  cudnnConvolutionFwdAlgo_t algo;
  cudnnMathType_t math = CUDNN_FMA_MATH;
  size_t workspace_bytes = 0;
};

/// The most workspace an algorithm search offers cuDNN: 1 GiB, or a quarter of the GPU's free
/// memory where that is less.
constexpr size_t kSearchWorkspaceBytes = size_t{1} << 30;

/// The search's workspace, straight from cudaMalloc and freed after the search, so that the
/// caching allocator does not keep (and the peak memory report count) a block no run uses.
/// Empty where the memory cannot be had: the search then tries the algorithms that need none.
class SearchWorkspace {
 public:
  explicit SearchWorkspace(int device) : device_(device) {
    CudaDeviceGuard guard(device);
    size_t free = 0, total = 0;
    if (cudaMemGetInfo(&free, &total) == cudaSuccess) {
      bytes_ = std::min(kSearchWorkspaceBytes, free / 4);
      if (bytes_ && cudaMalloc(&data_, bytes_) != cudaSuccess) data_ = nullptr;
    }
    if (!data_) {
      cudaGetLastError();  // clear the failure: it is handled
      bytes_ = 0;
    }
  }
  ~SearchWorkspace() {
    if (!data_) return;
    CudaDeviceGuard guard(device_);
    cudaFree(data_);
  }
  SearchWorkspace(const SearchWorkspace&) = delete;
  SearchWorkspace& operator=(const SearchWorkspace&) = delete;
  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }

 private:
  int device_;
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

/// The fastest forward algorithm that pick_algorithm accepts, by cuDNN's measurement on the
/// call's own tensors (writing y); by its heuristic ranking where the search fails or offers
/// none, so that a search problem costs speed, never the run.
ConvAlgorithm choose_algorithm(CudaExecutionContext& cuda, const KernelContext& ctx,
                               const cudnn::TensorDesc& x_desc, const void* x,
                               const cudnn::FilterDesc& w_desc, const void* w,
                               cudnn::ConvDesc& conv_desc, const cudnn::TensorDesc& y_desc, void* y,
                               bool tensor_ops) {
  cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
  int count = 0;
  {
    const SearchWorkspace work(ctx.device().index);
    if (cudnnFindConvolutionForwardAlgorithmEx(cuda.cudnn(), x_desc, x, w_desc, w, conv_desc,
                                               y_desc, y, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &count,
                                               perf, work.data(),
                                               work.bytes()) != CUDNN_STATUS_SUCCESS ||
        std::none_of(perf, perf + count,
                     [&](const auto& p) { return cudnn::acceptable(p, tensor_ops); }))
      count = 0;
  }
  // A failed search may leave a CUDA error set, which the next launch check would blame on
  // another node; the heuristic below answers instead.
  if (count == 0) cudaGetLastError();
  if (count == 0)
    cudnn_check(
        cudnnGetConvolutionForwardAlgorithm_v7(cuda.cudnn(), x_desc, w_desc, conv_desc, y_desc,
                                               CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &count, perf),
        "Conv: cudnnGetConvolutionForwardAlgorithm_v7");
  const auto& best = cudnn::pick_algorithm(perf, count, ctx, "convolution forward", tensor_ops);
  ConvAlgorithm chosen{.algo = best.algo, .math = best.mathType};
  conv_desc.set_math(chosen.math);
  cudnn_check(cudnnGetConvolutionForwardWorkspaceSize(cuda.cudnn(), x_desc, w_desc, conv_desc,
                                                      y_desc, chosen.algo, &chosen.workspace_bytes),
              "Conv: cudnnGetConvolutionForwardWorkspaceSize");
  return chosen;
}

class ConvCudnn : public OpKernel {
 public:
  explicit ConvCudnn(const KernelInfo& info)
      : group_(info.node.attr_int("group", 1)), tf32_(info.plan_options.allow_tf32) {
    attrs_.parse(info.node);
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    const Tensor& w = ctx.input(1);
    const Tensor* b = ctx.optional_input(2);
    const DType dtype = x.dtype();
    if (dtype != DType::Float32 && !is_16bit_float(dtype))
      ctx.fail("expects float32, float16 or bfloat16 X, got ", x.describe());
    check_one_dtype(ctx, "X, W and B", 3);
    const ConvShapes s = conv_shapes(ctx, attrs_, group_, x, w);
    if (b && b->shape() != Shape{s.m})
      ctx.fail("B must be ", dtype_name(dtype), "[", s.m, "], got ", b->describe());
    if (s.g.rank() > 3) ctx.fail("cuDNN convolves at most 3 spatial dims");
    Tensor& y = ctx.allocate_output(0, s.out_shape, dtype);
    if (y.numel() == 0) return;
    CudaExecutionContext& cuda = CudaExecutionContext::of(ctx.execution());
    const WindowGeometry g = cudnn::lift_1d(s.g);
    const std::vector<int64_t> y_dims = cudnn::nc_dims(s.n, s.m, g.out);
    if (x.numel() == 0) {  // an empty sum (a zero-sized input dim under padding): y = B
      cuda_check(cudaMemsetAsync(y.raw_data(), 0, y.nbytes(), cuda.stream()),
                 "Conv: cudaMemsetAsync");
      if (b) cudnn::add_channel_bias(cuda, ctx, *b, y.raw_data(), y_dims);
      return;
    }
    std::vector<int64_t> x_dims = cudnn::nc_dims(s.n, s.c, g.in), pads = g.pads_begin;
    const Tensor* input = &x;
    Tensor padded;
    if (!cudnn::symmetric_pads(g)) {
      padded = cudnn::pad_spatial(cuda, ctx, x, x_dims, g.pads_begin, g.pads_end, 0.f);
      input = &padded;
      x_dims = std::vector<int64_t>(padded.shape().begin(), padded.shape().end());
      pads.assign(pads.size(), 0);
    }
    const std::vector<int64_t> w_dims = cudnn::filter_dims(s.m, s.c / s.group, g.kernel);
    cudnn::ConvDescriptors desc(ctx, x_dims, y_dims, w_dims, dtype, pads, g, s.group, tf32_);
    // 16-bit operands go to tensor cores as they are: float32 sums, as the CPU's 16-bit Conv.
    const bool tensor_ops = tf32_ || is_16bit_float(dtype);
    std::vector<int64_t> key = x_dims;
    key.insert(key.end(), w_dims.begin(), w_dims.end());
    key.insert(key.end(), pads.begin(), pads.end());
    key.push_back(ctx.device().index);
    key.push_back(static_cast<int64_t>(dtype));
    const auto algorithm = algorithms_.get(key, [&] {
      return std::make_shared<ConvAlgorithm>(choose_algorithm(cuda, ctx, desc.x, input->raw_data(),
                                                              desc.w, w.raw_data(), desc.conv,
                                                              desc.y, y.raw_data(), tensor_ops));
    });
    desc.conv.set_math(algorithm->math);
    Tensor work = cudnn::workspace(ctx, algorithm->workspace_bytes);
    const float one = 1.f, zero = 0.f;  // float scaling factors for every one of these types
    cudnn_check(cudnnConvolutionForward(cuda.cudnn(), &one, desc.x, input->raw_data(), desc.w,
                                        w.raw_data(), desc.conv, algorithm->algo, work.raw_data(),
                                        algorithm->workspace_bytes, &zero, desc.y, y.raw_data()),
                "Conv: cudnnConvolutionForward of X [", shape_to_string(x_dims), "] and W [",
                shape_to_string(w_dims), "]");
    if (b) cudnn::add_channel_bias(cuda, ctx, *b, y.raw_data(), y_dims);
  }

 private:
  WindowAttrs attrs_;
  int64_t group_ = 1;
  bool tf32_ = false;
  ShapeCache<ConvAlgorithm> algorithms_;
};

DPRUN_CUDA_COMPUTE("Conv", make_kernel<ConvCudnn>);

}  // namespace
}  // namespace dprun
