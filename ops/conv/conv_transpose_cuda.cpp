// The compute of the CUDA ConvTranspose (NCHW; defined in ops/conv/conv_transpose_cuda_def.cpp)
// with cuDNN, in float32, float16 and bfloat16 (16-bit X, W and B,
// float32 sums on tensor cores, each result rounded once; a 16-bit bias is added to the rounded
// result, as Conv's): the transposed convolution is the data gradient of a convolution
// (cudnnConvolutionBackwardData) whose input is Y and whose output is X, with W
// [C, M / group, k...] read as that convolution's filters. It is also the data gradient of Conv
// in training (ops/conv/conv_grad.cpp), so mixed-precision training keeps it in 16 bits. Geometry
// (pads, auto_pad, output_padding, output_shape, groups, dilations) is resolved as the CPU kernel
// does (WindowAttrs::resolve_transpose); bias B is added with cudnnAddTensor.
//
// cuDNN crops the same number of rows at both ends of the full result. When the node crops
// the ends differently (asymmetric pads, SAME_* with an odd total, output_shape), or asks for
// more rows than cuDNN derives from the shapes (output_padding >= stride, or an output_shape
// larger than the full result), the full, uncropped result is computed into a temporary and
// the wanted box copied out, rows past its end left zero. Nothing is declined for its geometry;
// declined by the definition (host): more than 3 spatial dims, an unknown rank, inputs known to be
// of other dtypes.
#include <cuda_runtime_api.h>

#include <algorithm>

#include "engine/backends/cuda/cuda_check.h"
#include "engine/backends/cuda/cuda_execution_context.h"
#include "ops/common/shape_cache.h"
#include "ops/conv/conv_descriptors_cuda.h"
#include "ops/cuda/cudnn_util.h"
#include "ops/cuda/defs/cuda_compute.h"
#include "ops/input_dtypes.h"

namespace dprun {
namespace {

struct BackwardDataAlgorithm {
  cudnnConvolutionBwdDataAlgo_t algo;
  cudnnMathType_t math = CUDNN_FMA_MATH;
  size_t workspace_bytes = 0;
};

class ConvTransposeCudnn : public OpKernel {
 public:
  explicit ConvTransposeCudnn(const KernelInfo& info)
      : group_(info.node.attr_int("group", 1)),
        tf32_(info.plan_options.allow_tf32),
        output_padding_(info.node.attr_ints("output_padding", {})),
        output_shape_(info.node.attr_ints("output_shape", {})) {
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
    const ConvTransposeShapes s =
        conv_transpose_shapes(ctx, attrs_, group_, output_padding_, output_shape_, x, w, b);
    if (s.g.rank() > 3) ctx.fail("cuDNN convolves at most 3 spatial dims");
    Tensor& y = ctx.allocate_output(0, s.out_shape, dtype);
    if (y.numel() == 0) return;
    CudaExecutionContext& cuda = CudaExecutionContext::of(ctx.execution());
    const WindowGeometry g = cudnn::lift_1d(s.g);
    const std::vector<int64_t> x_dims = cudnn::nc_dims(s.n, s.c, g.in),
                               y_dims = cudnn::nc_dims(s.n, s.m, g.out);
    // Direct: cuDNN's own symmetric crop gives exactly Y, which holds when the pads agree and
    // the convolution from Y back to X's size is the one cuDNN checks for.
    bool direct = cudnn::symmetric_pads(g) && x.numel() > 0;
    std::vector<int64_t> full(g.rank());
    for (size_t i = 0; i < g.rank(); ++i) {
      const int64_t ext = (g.kernel[i] - 1) * g.dilations[i] + 1;
      full[i] = g.strides[i] * (g.in[i] - 1) + ext;  // the uncropped result, no output_padding
      const int64_t span = g.out[i] + 2 * g.pads_begin[i] - ext;
      if (span < 0 || span / g.strides[i] + 1 != g.in[i]) direct = false;
    }
    if (direct) {
      backward_data(ctx, cuda, x, x_dims, w, g.pads_begin, g, y.raw_data(), y_dims);
    } else {
      // Y[o] = full[o + pads_begin] where that lies inside the full result, else 0.
      std::vector<int64_t> box = y_dims, src_start(y_dims.size(), 0);
      bool partial = x.numel() == 0;
      for (size_t i = 0; i < g.rank(); ++i) {
        src_start[i + 2] = g.pads_begin[i];
        box[i + 2] = std::clamp<int64_t>(full[i] - g.pads_begin[i], 0, g.out[i]);
        partial = partial || box[i + 2] < g.out[i];
      }
      if (partial)
        cuda_check(cudaMemsetAsync(y.raw_data(), 0, y.nbytes(), cuda.stream()),
                   "ConvTranspose: cudaMemsetAsync");
      if (x.numel() > 0) {
        const std::vector<int64_t> full_dims = cudnn::nc_dims(s.n, s.m, full);
        Tensor uncropped =
            Tensor::empty(Shape(full_dims.begin(), full_dims.end()), dtype, ctx.device());
        backward_data(ctx, cuda, x, x_dims, w, std::vector<int64_t>(g.rank(), 0), g,
                      uncropped.raw_data(), full_dims);
        cudnn::copy_box(cuda, ctx, dtype, uncropped.raw_data(), full_dims, src_start, y.raw_data(),
                        y_dims, std::vector<int64_t>(y_dims.size(), 0), box);
      }
    }
    if (b) cudnn::add_channel_bias(cuda, ctx, *b, y.raw_data(), y_dims);
  }

 private:
  /// out (dense, `out_dims`, x's dtype) = the transposed convolution of x with w, cuDNN
  /// cropping `pads` at both ends of every spatial dim.
  void backward_data(const KernelContext& ctx, CudaExecutionContext& cuda, const Tensor& x,
                     const std::vector<int64_t>& x_dims, const Tensor& w,
                     const std::vector<int64_t>& pads, const WindowGeometry& g, void* out,
                     const std::vector<int64_t>& out_dims) const {
    const std::vector<int64_t> w_dims =
        cudnn::filter_dims(x_dims[1], out_dims[1] / group_, g.kernel);
    cudnn::ConvDescriptors desc(ctx, x_dims, out_dims, w_dims, x.dtype(), pads, g, group_, tf32_);
    // 16-bit operands go to tensor cores as they are: float32 sums.
    const bool tensor_ops = tf32_ || is_16bit_float(x.dtype());
    std::vector<int64_t> key = x_dims;
    key.insert(key.end(), out_dims.begin(), out_dims.end());
    key.insert(key.end(), pads.begin(), pads.end());
    key.push_back(ctx.device().index);
    key.push_back(static_cast<int64_t>(x.dtype()));
    const auto algorithm = algorithms_.get(key, [&] {
      cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
      int count = 0;
      cudnn_check(cudnnGetConvolutionBackwardDataAlgorithm_v7(
                      cuda.cudnn(), desc.w, desc.x, desc.conv, desc.y,
                      CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &count, perf),
                  "ConvTranspose: cudnnGetConvolutionBackwardDataAlgorithm_v7");
      auto chosen = std::make_shared<BackwardDataAlgorithm>();
      const auto& best =
          cudnn::pick_algorithm(perf, count, ctx, "convolution backward-data", tensor_ops);
      chosen->algo = best.algo;
      chosen->math = best.mathType;
      desc.conv.set_math(chosen->math);
      cudnn_check(cudnnGetConvolutionBackwardDataWorkspaceSize(cuda.cudnn(), desc.w, desc.x,
                                                               desc.conv, desc.y, chosen->algo,
                                                               &chosen->workspace_bytes),
                  "ConvTranspose: cudnnGetConvolutionBackwardDataWorkspaceSize");
      return chosen;
    });
    desc.conv.set_math(algorithm->math);
    Tensor work = cudnn::workspace(ctx, algorithm->workspace_bytes);
    const float one = 1.f, zero = 0.f;  // float scaling factors for every one of these types
    cudnn_check(
        cudnnConvolutionBackwardData(cuda.cudnn(), &one, desc.w, w.raw_data(), desc.x, x.raw_data(),
                                     desc.conv, algorithm->algo, work.raw_data(),
                                     algorithm->workspace_bytes, &zero, desc.y, out),
        "ConvTranspose: cudnnConvolutionBackwardData of X [", shape_to_string(x_dims), "] into [",
        shape_to_string(out_dims), "]");
  }

  WindowAttrs attrs_;
  int64_t group_ = 1;
  bool tf32_ = false;
  std::vector<int64_t> output_padding_, output_shape_;
  ShapeCache<BackwardDataAlgorithm> algorithms_;
};

DPRUN_CUDA_COMPUTE("ConvTranspose", make_kernel<ConvTransposeCudnn>);

}  // namespace
}  // namespace dprun
