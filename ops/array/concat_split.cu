// The compute of the CUDA Concat and Split (defined in ops/array/concat_split_cuda_def.cpp), for
// every dtype: each input (Concat) or output (Split) is one strided copy of [outer, rows] blocks
// into (or out of) its column range of the wider tensor. Arguments and messages are the CPU
// kernels' (ops/array/concat_split.h).
#include "ops/array/concat_split.h"
#include "ops/cuda/defs/cuda_compute.h"
#include "ops/cuda/strided_copy.h"

namespace dprun {
namespace {

class ConcatCuda : public OpKernel {
 public:
  explicit ConcatCuda(const KernelInfo& info) : params_(info) {}

  void compute(KernelContext& ctx) const override {
    const ConcatLayout c = params_.layout(ctx);
    Tensor& y = ctx.allocate_output(0, c.out_shape, c.parts[0]->dtype());
    const int64_t out_row = c.out_shape[static_cast<size_t>(c.axis)] * c.inner;
    int64_t column = 0;
    for (const Tensor* t : c.parts) {
      const int64_t row = t->shape()[static_cast<size_t>(c.axis)] * c.inner;
      cuda_strided_copy(ctx, {c.outer, row}, t->raw_data(), 0, {row, 1}, y.raw_data(), column,
                        {out_row, 1}, dtype_size(y.dtype()));
      column += row;
    }
  }

 private:
  ConcatParams params_;
};

class SplitCuda : public OpKernel {
 public:
  explicit SplitCuda(const KernelInfo& info) : params_(info) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    const SplitLayout s = params_.layout(ctx, x.shape());
    const auto axis = static_cast<size_t>(s.axis);
    const int64_t in_row = x.shape()[axis] * s.inner;
    int64_t column = 0;
    for (size_t i = 0; i < s.sizes.size(); ++i) {
      const int64_t row = s.sizes[i] * s.inner;
      if (ctx.output_wanted(i)) {
        Shape shape = x.shape();
        shape[axis] = s.sizes[i];
        Tensor& y = ctx.allocate_output(i, shape, x.dtype());
        cuda_strided_copy(ctx, {s.outer, row}, x.raw_data(), column, {in_row, 1}, y.raw_data(), 0,
                          {row, 1}, dtype_size(x.dtype()));
      }
      column += row;
    }
  }

 private:
  SplitParams params_;
};

DPRUN_CUDA_COMPUTE("Concat", make_kernel<ConcatCuda>);
DPRUN_CUDA_COMPUTE("Split", make_kernel<SplitCuda>);

}  // namespace
}  // namespace dprun
