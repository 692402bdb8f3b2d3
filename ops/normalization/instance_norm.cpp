// InstanceNormalization and GroupNormalization on X [N, C, D1, ...]: both normalize contiguous
// rows (one per (n, c), resp. per (n, group)) with their own mean and population variance,
// then apply a per-channel scale and bias.
// GroupNormalization's scale/bias have num_groups elements in opset 18 and C from opset 21;
// either size is accepted in every opset.
#include <cmath>

#include "engine/op_facts.h"
#include "ops/normalization/norm_loops.h"

namespace dprun {
namespace {

/// Normalizes rows of `channels * S` elements (`groups` rows per sample); channel c of a row
/// uses scale[c] / bias[c] from per-channel vectors of length groups * channels.
template <class T>
void normalize_groups(const ExecutionContext& exec, const T* x, T* y, int64_t N, int64_t groups,
                      int64_t channels, int64_t S, const std::vector<double>& scale,
                      const std::vector<double>& bias, double epsilon) {
  using Ct = std::conditional_t<std::is_same_v<T, double>, double, float>;
  const int64_t len = channels * S;
  exec.parallel_for(N * groups, std::max<int64_t>(1, 8192 / std::max<int64_t>(len, 1)),
                    [&](int64_t r0, int64_t r1) {
                      for (int64_t r = r0; r < r1; ++r) {
                        const T* xr = x + r * len;
                        T* yr = y + r * len;
                        const auto [m, v] = row_moments(xr, len);
                        const double inv = 1.0 / std::sqrt(v + epsilon);
                        const int64_t g = r % groups;
                        for (int64_t c = 0; c < channels; ++c) {
                          const double sc = scale[g * channels + c] * inv;
                          const Ct a = static_cast<Ct>(sc);
                          const Ct b = static_cast<Ct>(bias[g * channels + c] - m * sc);
                          const T* xc = xr + c * S;
                          T* yc = yr + c * S;
                          for (int64_t s = 0; s < S; ++s)
                            yc[s] = store_as<T>(load_as<Ct>(xc[s]) * a + b);
                        }
                      }
                    });
}

class InstanceNormKernel : public OpKernel {
 public:
  explicit InstanceNormKernel(const KernelInfo& info)
      : epsilon_(info.node.attr_float("epsilon", 1e-5f)) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    if (x.rank() < 2)
      ctx.fail("input must have rank >= 2 ([N, C, ...]), got shape ", shape_to_string(x.shape()));
    const int64_t N = x.shape()[0], C = x.shape()[1];
    const int64_t S = dims_product(x.shape(), 2, x.rank());
    check_param_size(ctx, ctx.input(1), C, "scale", x.shape());
    check_param_size(ctx, ctx.input(2), C, "B", x.shape());
    const std::vector<double> scale = read_as<double>(ctx, ctx.input(1), "scale");
    const std::vector<double> bias = read_as<double>(ctx, ctx.input(2), "B");
    Tensor& y = ctx.allocate_output(0, x.shape(), x.dtype());
    visit_float_dtype(ctx, x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      normalize_groups<T>(ctx.execution(), x.data<T>(), y.data<T>(), N, C, 1, S, scale, bias,
                          epsilon_);
    });
  }

 private:
  float epsilon_;
};

class GroupNormKernel : public OpKernel {
 public:
  explicit GroupNormKernel(const KernelInfo& info)
      : epsilon_(info.node.attr_float("epsilon", 1e-5f)),
        groups_(info.node.attr_int("num_groups")) {
    if (groups_ <= 0) info.node.fail("num_groups must be positive, got ", groups_);
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    if (x.rank() < 2)
      ctx.fail("input must have rank >= 2 ([N, C, ...]), got shape ", shape_to_string(x.shape()));
    const int64_t N = x.shape()[0], C = x.shape()[1];
    const int64_t S = dims_product(x.shape(), 2, x.rank());
    if (C % groups_ != 0)
      ctx.fail("channel count ", C, " is not divisible by num_groups ", groups_);
    const int64_t per_group = C / groups_;
    auto per_channel = [&](const Tensor& t, const char* what) {
      std::vector<double> v = read_as<double>(ctx, t, what);
      if (t.numel() == C) return v;
      if (t.numel() != groups_)
        ctx.fail(what, " must have num_groups (", groups_, ") or C (", C, ") elements, got shape ",
                 shape_to_string(t.shape()));
      std::vector<double> out(static_cast<size_t>(C));
      for (int64_t c = 0; c < C; ++c) out[c] = v[c / per_group];
      return out;
    };
    const std::vector<double> scale = per_channel(ctx.input(1), "scale");
    const std::vector<double> bias = per_channel(ctx.input(2), "bias");
    Tensor& y = ctx.allocate_output(0, x.shape(), x.dtype());
    visit_float_dtype(ctx, x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      normalize_groups<T>(ctx.execution(), x.data<T>(), y.data<T>(), N, groups_, per_group, S,
                          scale, bias, epsilon_);
    });
  }

 private:
  float epsilon_;
  int64_t groups_;
};

DPRUN_REGISTER_KERNEL({.op_type = "InstanceNormalization",
                       .since = 1,
                       .factory = make_kernel<InstanceNormKernel>});
DPRUN_REGISTER_KERNEL({.op_type = "GroupNormalization",
                       .since = 18,
                       .factory = make_kernel<GroupNormKernel>});

}  // namespace
}  // namespace dprun

// The ops' facts (engine/op_facts.h): output types, shapes, 16-bit and layout policy.
namespace dprun {
namespace {
DPRUN_REGISTER_OP_FACTS({.op_type = "GroupNormalization", .shape = ShapeKind::SameAsInput0});
DPRUN_REGISTER_OP_FACTS({.op_type = "InstanceNormalization", .shape = ShapeKind::SameAsInput0});

}  // namespace
}  // namespace dprun
