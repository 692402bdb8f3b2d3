// Transpose: a permuted copy, moved by element size so every dtype shares one path.
#include "ops/cpu/data_movement.h"

namespace dprun {
namespace {

class TransposeKernel : public OpKernel {
 public:
  explicit TransposeKernel(const KernelInfo& info) {
    if (info.node.has_attr("perm")) perm_ = info.node.attr_ints("perm");
  }
  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    const std::vector<int64_t> perm = transpose_perm(perm_, static_cast<size_t>(x.rank()), ctx);
    Shape out_shape;
    for (int64_t p : perm) out_shape.push_back(x.shape()[static_cast<size_t>(p)]);
    Tensor& y = ctx.allocate_output(0, out_shape, x.dtype());
    permute_copy(ctx.execution(), x.raw_data(), x.shape(), perm, y.raw_data(),
                 dtype_size(x.dtype()));
  }

 private:
  std::vector<int64_t> perm_;
};

DPRUN_REGISTER_KERNEL({.op_type = "Transpose",
                       .since = 1,
                       .factory = make_kernel<TransposeKernel>});

}  // namespace
}  // namespace dprun
