// SoftmaxCrossEntropyGrad (rewrite domain): the scores' gradient of SoftmaxCrossEntropyLoss as
// its rule (softmax_cross_entropy_grad.cpp) writes it, softmax times each position's share of the
// loss's gradient, less that share at the position's label:
//   dX[n, c, d] = scale[n, 0, d] * (softmax(X)[n, c, d] - (c == index[n, 0, d]))
// one pass over the scores (the Softmax kernel's rows, each scaled as it is written) instead of
// a Softmax, a Mul, zeros of the scores' size, their scatter and an Add (the node's contract:
// engine/rewrites/cross_entropy_grad_fusion.h).
#include <string>
#include <vector>

#include "engine/kernel.h"
#include "engine/rewrites/rewrite_domain.h"
#include "ops/common/reduce_common.h"
#include "ops/softmax/scaled_softmax.h"

namespace dprun {
namespace {

class SoftmaxCrossEntropyGradKernel : public OpKernel {
 public:
  explicit SoftmaxCrossEntropyGradKernel(const KernelInfo&) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    const Tensor& index = ctx.input(1);
    const Tensor& scale = ctx.input(2);
    const Shape& shape = x.shape();
    if (shape.size() < 2)
      ctx.fail("the scores have rank ", shape.size(), "; they need [N, C, ...]");
    Shape per_position = shape;
    per_position[1] = 1;
    if (index.shape() != per_position || scale.shape() != per_position)
      ctx.fail("the index ", shape_to_string(index.shape()), " and the scale ",
               shape_to_string(scale.shape()), " must both be ", shape_to_string(per_position),
               " for scores ", shape_to_string(shape));
    if (scale.dtype() != x.dtype())
      ctx.fail("the scale is ", dtype_name(scale.dtype()), ", the scores ", dtype_name(x.dtype()));
    const int64_t N = shape[0], C = shape[1], inner = dims_product(shape, 2, x.rank());
    const std::vector<int64_t> labels = read_int_list(ctx, index, "index");
    for (int64_t label : labels)
      if (label < -C || label >= C) ctx.fail("index ", label, " is outside [", -C, ", ", C, ")");
    // The softmax pass writes each element after reading it: the output may take X's memory.
    Tensor& dx = ctx.allocate_output_reusing(0, 0, shape, x.dtype());
    if (x.numel() == 0) return;
    visit_dtype_among<float, double>(x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const T* s = scale.data<T>();
      T* out = dx.data<T>();
      scaled_softmax<T>(ctx.execution(), x.data<T>(), s, out, N, C, inner);
      for (int64_t p = 0; p < N * inner; ++p) {
        const int64_t label = labels[static_cast<size_t>(p)];
        const int64_t n = p / inner, i = p % inner;
        out[(n * C + (label < 0 ? label + C : label)) * inner + i] -= s[p];
      }
    });
  }
};

DPRUN_REGISTER_KERNEL({.domain = kRewriteDomain,
                       .op_type = "SoftmaxCrossEntropyGrad",
                       .dtypes = {DType::Float32, DType::Float64},
                       .factory = make_kernel<SoftmaxCrossEntropyGradKernel>});

}  // namespace
}  // namespace dprun
