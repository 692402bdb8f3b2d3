// The compute of the CUDA Transpose (defined in ops/array/transpose_cuda_def.cpp), for every dtype:
// a strided copy (ops/cuda/strided_copy.h) of the input read through permuted strides into the
// contiguous output. The copy drops size-1 dims and merges output dims that are also neighbours in
// the input, so a permutation that keeps the order becomes one device-to-device copy.
#include "ops/cuda/defs/cuda_compute.h"
#include "ops/cuda/strided_copy.h"

namespace dprun {
namespace {

class TransposeCuda : public OpKernel {
 public:
  explicit TransposeCuda(const KernelInfo& info) {
    if (info.node.has_attr("perm")) perm_ = info.node.attr_ints("perm");
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    const std::vector<int64_t> perm = transpose_perm(perm_, static_cast<size_t>(x.rank()), ctx);
    const StridedView view = permuted_view(x.shape(), perm);
    Tensor& y = ctx.allocate_output(0, view.shape, x.dtype());
    cuda_view_copy(ctx, x, view, y);
  }

 private:
  std::vector<int64_t> perm_;
};

DPRUN_CUDA_COMPUTE("Transpose", make_kernel<TransposeCuda>);

}  // namespace
}  // namespace dprun
