// LayerNormGrad (rewrite domain, float32): the input gradient of LayerNormalization over the
// last axes as ops/normalization/layer_norm_grad.cpp writes it (statistics recomputed, then
// dX = inv * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)), dxhat = dY * Scale), in three
// passes over each row instead of the rule's fifteen nodes (the node's contract:
// engine/rewrites/layer_norm_fusion.h). Output 1, when wanted, is xhat = (X - mean) * inv, which
// the scale's gradient reads. Sums in double, in the vectorised loops of ops/cpu/simd_loops.h.
#include <cmath>

#include "engine/kernel.h"
#include "engine/rewrites/rewrite_domain.h"
#include "ops/cpu/simd_loops.h"

namespace dprun {
namespace {

class LayerNormGradKernel : public OpKernel {
 public:
  explicit LayerNormGradKernel(const KernelInfo& info)
      : axis_(info.node.attr_int("axis", -1)), epsilon_(info.node.attr_float("epsilon", 1e-5f)) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    const Tensor& dy = ctx.input(1);
    const Tensor& scale = ctx.input(2);
    const auto rank = static_cast<int64_t>(x.rank());
    const int64_t first = axis_ < 0 ? axis_ + rank : axis_;
    if (first < 0 || first >= rank) ctx.fail("axis ", axis_, " is out of range for rank ", rank);
    if (dy.shape() != x.shape())
      ctx.fail("dY ", shape_to_string(dy.shape()), " is not shaped like X ",
               shape_to_string(x.shape()));
    int64_t D = 1;
    for (int64_t a = first; a < rank; ++a) D *= x.shape()[static_cast<size_t>(a)];
    if (scale.numel() != D)
      ctx.fail("Scale has ", scale.numel(), " elements; the normalized axes hold ", D);
    Tensor& dx = ctx.allocate_output(0, x.shape(), DType::Float32);
    float* xhat = ctx.output_wanted(1)
                      ? ctx.allocate_output(1, x.shape(), DType::Float32).data<float>()
                      : nullptr;
    const int64_t rows = D == 0 ? 0 : x.numel() / D;
    const float* xp = x.data<float>();
    const float* gp = dy.data<float>();
    const float* sp = scale.data<float>();
    float* dp = dx.data<float>();
    ctx.parallel_for(
        rows, std::max<int64_t>(1, 8192 / std::max<int64_t>(D, 1)), [&](int64_t r0, int64_t r1) {
          for (int64_t r = r0; r < r1; ++r)
            row(xp + r * D, gp + r * D, sp, dp + r * D, xhat ? xhat + r * D : nullptr, D);
        });
  }

 private:
  // One row of D values: dxhat = dY * Scale into dx (then overwritten), the sums of the
  // vectorised loops the BatchNormTrainingGrad kernel uses, and
  // dX = inv * dxhat - inv^3 * mean(dxhat * (X - mean)) * (X - mean) - inv * mean(dxhat).
  void row(const float* x, const float* dy, const float* scale, float* dx, float* xhat,
           int64_t D) const {
    for (int64_t d = 0; d < D; ++d) dx[d] = dy[d] * scale[d];
    const double n = static_cast<double>(D);
    const auto mean = static_cast<float>(simd::sum_in_double(x, D) / n);
    double sq = 0, g_sum = 0, gd_sum = 0;
    simd::deviation_sums(x, dx, mean, D, sq, g_sum, gd_sum);
    const double inv = 1.0 / std::sqrt(sq / n + epsilon_);
    if (xhat) {
      const auto inv_f = static_cast<float>(inv);
      for (int64_t d = 0; d < D; ++d) xhat[d] = (x[d] - mean) * inv_f;
    }
    const auto b = static_cast<float>(-inv * inv * inv * gd_sum / n);
    const auto c = static_cast<float>(-inv * g_sum / n);
    simd::scaled_deviation(dx, x, mean, static_cast<float>(inv), b, c, dx, D);
  }

  int64_t axis_;
  double epsilon_;
};

DPRUN_REGISTER_KERNEL({.domain = kRewriteDomain,
                       .op_type = "LayerNormGrad",
                       .dtypes = {DType::Float32},
                       .factory = make_kernel<LayerNormGradKernel>});

}  // namespace
}  // namespace dprun
