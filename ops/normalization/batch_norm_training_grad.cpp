// BatchNormTrainingGrad (rewrite domain, float32): the gradient of a training-mode
// BatchNormalization over channel axis 1 as ops/normalization/batch_norm_grad.cpp writes it, in
// three passes over each channel instead of the rule's dozen ONNX nodes (the node's contract:
// engine/rewrites/op_fusion.h). With M the count of values behind a channel, xhat = (X - mean) *
// inv, inv = 1 / sqrt(var + epsilon) of the batch statistics:
//   dscale_sum = sum(dY * xhat), dbias_sum = sum(dY),
//   dX = scale * inv * (dY - (dbias_sum + xhat * dscale_sum) / M).
// Written by hand: for the plain NCHW layout oneDNN 2.6 has no JIT batch normalization, and its
// generic one measured several times slower than per-channel loops
// (ops/normalization/batch_norm_onednn.cpp).
#include <cmath>

#include "engine/kernel.h"
#include "engine/rewrites/rewrite_domain.h"
#include "ops/cpu/simd_loops.h"
#include "ops/normalization/batch_norm_training_grad_util.h"

namespace dprun {
namespace {

class BatchNormTrainingGradKernel : public OpKernel {
 public:
  explicit BatchNormTrainingGradKernel(const KernelInfo& info)
      : epsilon_(info.node.attr_float("epsilon", 1e-5f)) {}

  void compute(KernelContext& ctx) const override {
    const BatchNormGradTensors t = batch_norm_grad_tensors(ctx);
    const float* x = ctx.input(0).data<float>();
    const float* dy = ctx.input(1).data<float>();
    const float* scale = ctx.input(2).data<float>();
    const int64_t C = t.c, S = t.s;
    ctx.parallel_for(C, 1, [&](int64_t c0, int64_t c1) {
      for (int64_t c = c0; c < c1; ++c)
        channel(x + c * S, dy + c * S, t.dx->data<float>() + c * S, t.n, C * S, S, scale[c],
                t.dscale_sum->data<float>()[c], t.dbias_sum->data<float>()[c]);
    });
  }

 private:
  // One channel: N rows of S values, `stride` apart, in x, dy and dx.
  void channel(const float* x, const float* dy, float* dx, int64_t N, int64_t stride, int64_t S,
               float scale, float& dscale_sum, float& dbias_sum) const {
    const double M = static_cast<double>(N * S);
    if (M == 0) {
      dscale_sum = dbias_sum = 0.0f;
      return;
    }
    double sum = 0;
    for (int64_t n = 0; n < N; ++n) sum += simd::sum_in_double(x + n * stride, S);
    const float mean = static_cast<float>(sum / M);
    double sq = 0, g_sum = 0, gd_sum = 0;
    for (int64_t n = 0; n < N; ++n)
      simd::deviation_sums(x + n * stride, dy + n * stride, mean, S, sq, g_sum, gd_sum);
    const double inv = 1.0 / std::sqrt(sq / M + static_cast<double>(epsilon_));
    const double gx_sum = gd_sum * inv;  // sum(dY * xhat)
    dscale_sum = static_cast<float>(gx_sum);
    dbias_sum = static_cast<float>(g_sum);
    // dX = a * dY + b * (X - mean) + c.
    const double a = static_cast<double>(scale) * inv;
    const float b = static_cast<float>(-a * inv * gx_sum / M);
    const float c = static_cast<float>(-a * g_sum / M);
    for (int64_t n = 0; n < N; ++n)
      simd::scaled_deviation(dy + n * stride, x + n * stride, mean, static_cast<float>(a), b, c,
                             dx + n * stride, S);
  }

  float epsilon_;
};

DPRUN_REGISTER_KERNEL({.domain = kRewriteDomain,
                       .op_type = "BatchNormTrainingGrad",
                       .dtypes = {DType::Float32},
                       .factory = make_kernel<BatchNormTrainingGradKernel>});

}  // namespace
}  // namespace dprun
