// The compute of the CUDA ConvWeightGrad (rewrite domain, float32; defined in
// ops/conv/conv_weight_grad_cuda_def.cpp; the contract is in engine/rewrites/op_fusion.h): the
// weight gradient of a convolution of any group as cuDNN's
// backward-filter convolution on the forward geometry (the group count on the convolution
// descriptor, the filter [M, C / group, kernel...]), where the gradient rule's ONNX form
// would run a forward convolution whose kernel is as large as the image.
//
// Direct when cuDNN can take the node's geometry as it is: the pads agree at both ends and dY
// is the convolution's output. Otherwise X is first placed at its begin pads in a zeroed
// tensor exactly as long as dY's windows reach (zero-extended or cropped at the end), which
// cuDNN convolves without padding: that covers asymmetric pads, rows a stride leaves unused
// past the end pad, and a dY that is no convolution's output, so nothing is declined for its
// geometry. Declined by the definition (the node runs on the host): more than 3 spatial dims, X
// known to be of another dtype.
//
// Only deterministic backward-filter algorithms are taken (cuDNN's heuristic ranking, as
// ConvTranspose's): the atomic ones sum in a different order on every run, and a training run
// must repeat bit for bit.
#include <cuda_runtime_api.h>

#include <algorithm>

#include "engine/backends/cuda/cuda_check.h"
#include "engine/backends/cuda/cuda_execution_context.h"
#include "ops/common/shape_cache.h"
#include "ops/conv/conv_descriptors_cuda.h"
#include "ops/conv/conv_weight_grad_util.h"
#include "ops/cuda/cudnn_util.h"
#include "ops/cuda/defs/cuda_compute.h"

namespace dprun {
namespace {

struct BackwardFilterAlgorithm {
  cudnnConvolutionBwdFilterAlgo_t algo;
  cudnnMathType_t math = CUDNN_FMA_MATH;
  size_t workspace_bytes = 0;
};

/// X [N, C, in...] at offset `before` of a zeroed [N, C, padded...] tensor; X's rows past its
/// end are left out.
Tensor placed_in_zeros(CudaExecutionContext& cuda, const KernelContext& ctx, const Tensor& x,
                       const std::vector<int64_t>& x_dims, const std::vector<int64_t>& before,
                       const std::vector<int64_t>& padded) {
  const std::vector<int64_t> dims = cudnn::nc_dims(x_dims[0], x_dims[1], padded);
  Tensor out = Tensor::empty(Shape(dims.begin(), dims.end()), x.dtype(), ctx.device());
  cuda_check(cudaMemsetAsync(out.raw_data(), 0, out.nbytes(), cuda.stream()),
             "ConvWeightGrad: cudaMemsetAsync");
  std::vector<int64_t> box = x_dims, start(dims.size(), 0);
  for (size_t i = 0; i < padded.size(); ++i) {
    start[i + 2] = before[i];
    box[i + 2] = std::clamp<int64_t>(padded[i] - before[i], 0, x_dims[i + 2]);
  }
  cudnn::copy_box(cuda, ctx, x.dtype(), x.raw_data(), x_dims, std::vector<int64_t>(dims.size(), 0),
                  out.raw_data(), dims, start, box);
  return out;
}

class ConvWeightGradCudnn : public OpKernel {
 public:
  explicit ConvWeightGradCudnn(const KernelInfo& info) : tf32_(info.plan_options.allow_tf32) {
    attrs_.parse(info.node);
    group_ = info.node.attr_int("group", 1);
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    const Tensor& dy = ctx.input(1);
    const WeightGradShapes s = weight_grad_shapes(ctx, attrs_, group_, x, dy);
    Tensor& dw = ctx.allocate_output(0, s.dw_shape, DType::Float32);
    if (dw.numel() == 0) return;
    CudaExecutionContext& cuda = CudaExecutionContext::of(ctx.execution());
    if (x.numel() == 0 || dy.numel() == 0) {  // an empty batch adds nothing
      cuda_check(cudaMemsetAsync(dw.raw_data(), 0, dw.nbytes(), cuda.stream()),
                 "ConvWeightGrad: cudaMemsetAsync");
      return;
    }
    WindowGeometry g = s.g;
    g.kernel = s.window;
    std::vector<int64_t> x_dims = cudnn::nc_dims(x.dim(0), x.dim(1), g.in);
    const Tensor* input = &x;
    Tensor placed;
    if (!s.is_convolution_output || !cudnn::symmetric_pads(g)) {
      // Exactly as long as dY's windows reach: a convolution without padding gives dY's size.
      std::vector<int64_t> reach;
      for (size_t i = 0; i < g.rank(); ++i)
        reach.push_back((g.out[i] - 1) * g.strides[i] + (g.kernel[i] - 1) * g.dilations[i] + 1);
      placed = placed_in_zeros(cuda, ctx, x, x_dims, g.pads_begin, reach);
      input = &placed;
      x_dims = std::vector<int64_t>(placed.shape().begin(), placed.shape().end());
      g.in = reach;
      g.pads_begin.assign(g.rank(), 0);
      g.pads_end.assign(g.rank(), 0);
    }
    backward_filter(ctx, cuda, *input, x_dims, dy, cudnn::lift_1d(g), dw);
  }

 private:
  /// dw = cuDNN's backward-filter convolution of x (dense, `x_dims`) and dy, with the
  /// (symmetric) pads, strides and dilations of `g`.
  void backward_filter(const KernelContext& ctx, CudaExecutionContext& cuda, const Tensor& x,
                       std::vector<int64_t> x_dims, const Tensor& dy, const WindowGeometry& g,
                       Tensor& dw) const {
    x_dims.resize(g.rank() + 2, 1);  // a 1-D window lifted to 2-D
    const std::vector<int64_t> dy_dims = cudnn::nc_dims(dy.dim(0), dy.dim(1), g.out);
    const std::vector<int64_t> w_dims = cudnn::filter_dims(dy.dim(1), x.dim(1) / group_, g.kernel);
    cudnn::ConvDescriptors desc(ctx, x_dims, dy_dims, w_dims, DType::Float32, g.pads_begin, g,
                                group_, tf32_);
    std::vector<int64_t> key = x_dims;
    key.insert(key.end(), dy_dims.begin(), dy_dims.end());
    key.insert(key.end(), w_dims.begin(), w_dims.end());
    key.insert(key.end(), g.pads_begin.begin(), g.pads_begin.end());
    key.push_back(group_);
    key.push_back(ctx.device().index);
    const auto algorithm = algorithms_.get(key, [&] {
      cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
      int count = 0;
      cudnn_check(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
                      cuda.cudnn(), desc.x, desc.y, desc.conv, desc.w,
                      CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &count, perf),
                  "ConvWeightGrad: cudnnGetConvolutionBackwardFilterAlgorithm_v7");
      // The ranking without its nondeterministic entries.
      const auto end = std::remove_if(
          perf, perf + count, [](const auto& p) { return p.determinism != CUDNN_DETERMINISTIC; });
      const auto& best = cudnn::pick_algorithm(perf, static_cast<int>(end - perf), ctx,
                                               "deterministic convolution backward-filter", tf32_);
      auto chosen = std::make_shared<BackwardFilterAlgorithm>();
      chosen->algo = best.algo;
      chosen->math = best.mathType;
      desc.conv.set_math(chosen->math);
      cudnn_check(cudnnGetConvolutionBackwardFilterWorkspaceSize(cuda.cudnn(), desc.x, desc.y,
                                                                 desc.conv, desc.w, chosen->algo,
                                                                 &chosen->workspace_bytes),
                  "ConvWeightGrad: cudnnGetConvolutionBackwardFilterWorkspaceSize");
      return chosen;
    });
    desc.conv.set_math(algorithm->math);
    Tensor work = cudnn::workspace(ctx, algorithm->workspace_bytes);
    const float one = 1.f, zero = 0.f;
    cudnn_check(
        cudnnConvolutionBackwardFilter(cuda.cudnn(), &one, desc.x, x.raw_data(), desc.y,
                                       dy.raw_data(), desc.conv, algorithm->algo, work.raw_data(),
                                       algorithm->workspace_bytes, &zero, desc.w, dw.raw_data()),
        "ConvWeightGrad: cudnnConvolutionBackwardFilter of X [", shape_to_string(x_dims),
        "] and dY [", shape_to_string(dy_dims), "]");
  }

  WindowAttrs attrs_;
  int64_t group_ = 1;
  bool tf32_ = false;
  ShapeCache<BackwardFilterAlgorithm> algorithms_;
};

DPRUN_CUDA_COMPUTE("dprun::ConvWeightGrad", make_kernel<ConvWeightGradCudnn>);

}  // namespace
}  // namespace dprun
