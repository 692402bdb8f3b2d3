// LayerNormalization: normalizes over dimensions [axis, rank) of X, then applies Scale and
// the optional B (both unidirectionally broadcast to X.shape[axis:]). Optional outputs Mean
// and InvStdDev have shape X.shape[:axis] + [1, ...] and dtype float32 (float64 for float64
// inputs). Statistics are accumulated in double whatever stash_type asks, which is at least
// as precise. Standard since opset 17; registered from opset 1 as well because the same
// signature was widely used as a contrib op in the default domain before that.
#include <cmath>
#include <type_traits>
#include <vector>

#include "engine/half.h"
#include "engine/op_facts.h"
#include "ops/common/broadcast.h"
#include "ops/normalization/layer_norm_util.h"
#include "ops/normalization/norm_loops.h"

namespace dprun {
namespace {

/// `param` expanded to `target` (unidirectional broadcast) as a flat vector.
template <class C>
std::vector<C> expand_param(const KernelContext& ctx, const Tensor& param, const Shape& target,
                            const char* what) {
  const Shape& ps = param.shape();
  check_param_broadcast(ctx, ps, target, what);
  std::vector<C> values = read_as<C>(ctx, param, what);
  const int64_t n = shape_numel(target);
  if (static_cast<int64_t>(values.size()) == n) return values;
  std::vector<C> out(static_cast<size_t>(n));
  const std::vector<int64_t> strides = broadcast_strides(ps, target.size());
  std::vector<int64_t> idx(target.size(), 0);
  for (int64_t i = 0; i < n; ++i) {
    int64_t off = 0;
    for (size_t d = 0; d < target.size(); ++d) off += idx[d] * strides[d];
    out[static_cast<size_t>(i)] = values[static_cast<size_t>(off)];
    for (size_t d = target.size(); d-- > 0;) {
      if (++idx[d] < target[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}

class LayerNormKernel : public OpKernel {
 public:
  explicit LayerNormKernel(const KernelInfo& info) : attrs_(info) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    const LayerNormRun run = start_layer_norm(ctx, x, attrs_.axis);
    const int64_t rows = run.rows, D = run.d;
    const Shape& norm_shape = run.norm_shape;
    Tensor& y = *run.y;
    Tensor* mean_out = run.mean;
    Tensor* inv_out = run.inv_std;
    visit_float_dtype(ctx, x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      using Ct = std::conditional_t<std::is_same_v<T, double>, double, float>;
      const std::vector<Ct> scale = expand_param<Ct>(ctx, ctx.input(1), norm_shape, "Scale");
      std::vector<Ct> bias;
      if (const Tensor* b = ctx.optional_input(2))
        bias = expand_param<Ct>(ctx, *b, norm_shape, "B");
      const T* xp = x.data<T>();
      T* yp = y.data<T>();
      Ct* mp = mean_out ? mean_out->data<Ct>() : nullptr;
      Ct* ip = inv_out ? inv_out->data<Ct>() : nullptr;
      const Ct* sp = scale.data();
      const Ct* bp = bias.empty() ? nullptr : bias.data();
      // One row: its moments and y over float or double values `xr` into `yr`.
      auto normalize = [&](int64_t r, const Ct* xr, Ct* yr) {
        const auto [m, v] = row_moments(xr, D);
        const double inv = 1.0 / std::sqrt(v + static_cast<double>(attrs_.epsilon));
        const Ct mean = static_cast<Ct>(m), inv_std = static_cast<Ct>(inv);
        if (bp)
          for (int64_t d = 0; d < D; ++d) yr[d] = (xr[d] - mean) * inv_std * sp[d] + bp[d];
        else
          for (int64_t d = 0; d < D; ++d) yr[d] = (xr[d] - mean) * inv_std * sp[d];
        if (mp) mp[r] = mean;
        if (ip) ip[r] = inv_std;
      };
      ctx.parallel_for(
          rows, std::max<int64_t>(1, 8192 / std::max<int64_t>(D, 1)), [&](int64_t r0, int64_t r1) {
            if constexpr (std::is_same_v<T, Ct>) {
              for (int64_t r = r0; r < r1; ++r) normalize(r, xp + r * D, yp + r * D);
            } else {
              // 16-bit rows are widened into float and narrowed back a row at a time, in
              // vectorised loops (engine/half.h): the same values as element by element.
              std::vector<float> wide(static_cast<size_t>(D)), out(static_cast<size_t>(D));
              for (int64_t r = r0; r < r1; ++r) {
                widen(xp + r * D, wide.data(), D);
                normalize(r, wide.data(), out.data());
                narrow(out.data(), yp + r * D, D);
              }
            }
          });
    });
  }

 private:
  LayerNormAttrs attrs_;
};

DPRUN_REGISTER_KERNEL({.op_type = "LayerNormalization",
                       .since = 1,
                       .factory = make_kernel<LayerNormKernel>});

}  // namespace
}  // namespace dprun

// The ops' facts (engine/op_facts.h): output types, shapes, 16-bit and layout policy.
namespace dprun {
namespace {

// Y has X's type; Mean and InvStdDev are float32 (float64 for float64 inputs, as the kernel
// keeps them).
std::optional<DType> layer_norm_dtype(const Node& node, size_t output,
                                      const InputDType& input_dtype) {
  if (output == 0) return first_present_input_dtype(node, 0, input_dtype);
  auto x = node.inputs.empty() ? std::nullopt : input_dtype(0);
  return x == DType::Float64 ? DType::Float64 : DType::Float32;
}

DPRUN_REGISTER_OP_FACTS({.op_type = "LayerNormalization",
                         .dtype_function = layer_norm_dtype,
                         .shape = ShapeKind::SameAsInput0});

}  // namespace
}  // namespace dprun
