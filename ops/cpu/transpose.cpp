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
    const size_t r = static_cast<size_t>(x.rank());
    std::vector<int64_t> perm = perm_;
    if (perm.empty() && r > 0) {
      // Default: reverse the dimensions.
      for (size_t d = r; d-- > 0;) perm.push_back(static_cast<int64_t>(d));
    }
    if (perm.size() != r)
      ctx.fail("perm ", shape_to_string(perm), " does not match input rank ", r);
    std::vector<bool> seen(r, false);
    Shape out_shape(r);
    for (size_t k = 0; k < r; ++k) {
      int64_t p = perm[k] < 0 ? perm[k] + static_cast<int64_t>(r) : perm[k];
      if (p < 0 || p >= static_cast<int64_t>(r) || seen[static_cast<size_t>(p)])
        ctx.fail("perm ", shape_to_string(perm), " is not a permutation of rank ", r);
      seen[static_cast<size_t>(p)] = true;
      perm[k] = p;
      out_shape[k] = x.shape()[static_cast<size_t>(p)];
    }
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
