// ConcatBatchNormalizationNHWC(scale, B, mean, var, parts...): inference BatchNormalization of
// the concatenation of NHWC parts along channels, applied while the parts are copied
// (fuse_channels_last_ops, engine/backends/cpu/channels_last_fusion.h). Each element goes through
// the same simd::affine as BatchNormalizationNHWC, so the fused node gives the unfused pair's bits.
#include <algorithm>
#include <cstring>
#include <vector>

#include "engine/kernel.h"
#include "engine/rewrites/rewrite_domain.h"
#include "ops/channels_last/batch_norm_affine.h"
#include "ops/cpu/fused_activation.h"
#include "ops/cpu/simd_loops.h"

namespace dprun {
namespace {

constexpr size_t kFirstPart = 4;

class ConcatBatchNormNhwcKernel : public OpKernel {
 public:
  explicit ConcatBatchNormNhwcKernel(const KernelInfo& info)
      : epsilon_(info.node.attr_float("epsilon", 1e-5f)), activation_(info.node) {}

  void compute(KernelContext& ctx) const override {
    if (ctx.input_count() <= kFirstPart) ctx.fail("expects scale, B, mean, var and parts");
    const Tensor& first = ctx.input(kFirstPart);
    const DType dtype = first.dtype();
    if (first.rank() != 4) ctx.fail("parts must be 4-D (NHWC), got ", first.describe());
    int64_t channels = 0;
    for (size_t p = kFirstPart; p < ctx.input_count(); ++p) {
      const Tensor& part = ctx.input(p);
      if (part.dtype() != dtype || part.rank() != 4 || part.dim(0) != first.dim(0) ||
          part.dim(1) != first.dim(1) || part.dim(2) != first.dim(2))
        ctx.fail("part ", p - kFirstPart, " ", part.describe(), " cannot be concatenated with ",
                 first.describe(), " along channels");
      channels += part.dim(3);
    }
    for (size_t k = 0; k < kFirstPart; ++k)
      if (ctx.input(k).dtype() != dtype || ctx.input(k).numel() != channels)
        ctx.fail("input ", k, " must hold ", channels, " values of ", dtype_name(dtype), ", got ",
                 ctx.input(k).describe());
    Tensor& y = ctx.allocate_output(0, {first.dim(0), first.dim(1), first.dim(2), channels}, dtype);
    visit_dtype_among<float, double>(dtype, [&](auto tag) {
      using T = decltype(tag);
      std::vector<T> a, b;
      batch_norm_affine(ctx, 0, channels, epsilon_, a, b);
      normalize_parts<T>(ctx, a, b, y.data<T>(), channels);
    });
  }

 private:
  /// One pixel row of the output at a time: the parts' channels copied in, then the affine map
  /// and the activation over the whole row while it is in cache. The row goes through
  /// simd::affine exactly as BatchNormalizationNHWC's does (same length, same alignment), so
  /// the bits agree whichever way the vector loop rounds.
  template <class T>
  void normalize_parts(const KernelContext& ctx, const std::vector<T>& a, const std::vector<T>& b,
                       T* dst, int64_t channels) const {
    const Tensor& first = ctx.input(kFirstPart);
    const int64_t rows = first.dim(0) * first.dim(1) * first.dim(2);
    ctx.parallel_for(rows, std::max<int64_t>(1, 4096 / std::max<int64_t>(channels, 1)),
                     [&](int64_t begin, int64_t end) {
                       for (int64_t r = begin; r < end; ++r) {
                         T* row = dst + r * channels;
                         int64_t offset = 0;
                         for (size_t p = kFirstPart; p < ctx.input_count(); ++p) {
                           const Tensor& part = ctx.input(p);
                           const int64_t c = part.dim(3);
                           std::memcpy(row + offset, part.data<T>() + r * c,
                                       static_cast<size_t>(c) * sizeof(T));
                           offset += c;
                         }
                         simd::affine(row, a.data(), b.data(), row, channels);
                         activation_.apply(row, channels);
                       }
                     });
  }

  float epsilon_;
  FusedActivation activation_;
};

DPRUN_REGISTER_KERNEL({.domain = kRewriteDomain,
                       .op_type = "ConcatBatchNormalizationNHWC",
                       .dtypes = kFloatTypes,
                       .dtype_input = 4,
                       .factory = make_kernel<ConcatBatchNormNhwcKernel>});

}  // namespace
}  // namespace dprun
