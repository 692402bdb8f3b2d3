// Shape and Size: metadata of the input as int64 tensors.
#include "ops/cpu/shape_ops.h"

namespace dprun {
namespace {

class ShapeKernel : public OpKernel {
 public:
  explicit ShapeKernel(const KernelInfo& info) : params_(info) {}
  void compute(KernelContext& ctx) const override {
    const std::vector<int64_t> dims = params_.listed(ctx.input(0).shape());
    Tensor& y = ctx.allocate_output(0, {static_cast<int64_t>(dims.size())}, DType::Int64);
    std::copy(dims.begin(), dims.end(), y.data<int64_t>());
  }

 private:
  ShapeParams params_;
};

class SizeKernel : public OpKernel {
 public:
  explicit SizeKernel(const KernelInfo&) {}
  void compute(KernelContext& ctx) const override {
    Tensor& y = ctx.allocate_output(0, {}, DType::Int64);
    *y.data<int64_t>() = ctx.input(0).numel();
  }
};

DPRUN_REGISTER_KERNEL(
    {.op_type = "Shape", .since = 1, .metadata_inputs = {0}, .factory = make_kernel<ShapeKernel>});
DPRUN_REGISTER_KERNEL(
    {.op_type = "Size", .since = 1, .metadata_inputs = {0}, .factory = make_kernel<SizeKernel>});

}  // namespace
}  // namespace dprun
