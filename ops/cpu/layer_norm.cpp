// LayerNormalization: normalizes over dimensions [axis, rank) of X, then applies Scale and
// the optional B (both unidirectionally broadcast to X.shape[axis:]). Optional outputs Mean
// and InvStdDev have shape X.shape[:axis] + [1, ...] and dtype float32 (float64 for float64
// inputs). Statistics are accumulated in double whatever stash_type asks, which is at least
// as precise. Standard since opset 17; registered from opset 1 as well because the same
// signature was widely used as a contrib op in the default domain before that.
#include <cmath>

#include "ops/cpu/broadcast.h"
#include "ops/cpu/reduce_common.h"

namespace dprun {
namespace {

/// `param` expanded to `target` (unidirectional broadcast) as a flat vector.
template <class C>
std::vector<C> expand_param(const KernelContext& ctx, const Tensor& param, const Shape& target,
                            const char* what) {
  const Shape& ps = param.shape();
  bool ok = ps.size() <= target.size();
  for (size_t i = 0; ok && i < ps.size(); ++i) {
    const int64_t pd = ps[ps.size() - 1 - i], td = target[target.size() - 1 - i];
    ok = pd == td || pd == 1;
  }
  if (!ok)
    ctx.fail(what, " of shape ", shape_to_string(ps),
             " does not broadcast to the normalized shape ", shape_to_string(target));
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
  explicit LayerNormKernel(const KernelInfo& info)
      : axis_(info.node.attr_int("axis", -1)), epsilon_(info.node.attr_float("epsilon", 1e-5f)) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    const int64_t rank = x.rank();
    if (axis_ < -rank || axis_ >= rank)
      ctx.fail("axis ", axis_, " is out of range for input shape ", shape_to_string(x.shape()));
    const int64_t a = axis_ < 0 ? axis_ + rank : axis_;
    const int64_t rows = dims_product(x.shape(), 0, a);
    const int64_t D = dims_product(x.shape(), a, rank);
    const Shape norm_shape(x.shape().begin() + a, x.shape().end());
    Shape stat_shape(x.shape().begin(), x.shape().begin() + a);
    stat_shape.resize(static_cast<size_t>(rank), 1);
    Tensor& y = ctx.allocate_output(0, x.shape(), x.dtype());
    const DType stat_dtype = x.dtype() == DType::Float64 ? DType::Float64 : DType::Float32;
    Tensor* mean_out = nullptr;
    Tensor* inv_out = nullptr;
    if (ctx.output_count() > 1 && ctx.output_wanted(1))
      mean_out = &ctx.allocate_output(1, stat_shape, stat_dtype);
    if (ctx.output_count() > 2 && ctx.output_wanted(2))
      inv_out = &ctx.allocate_output(2, stat_shape, stat_dtype);
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
      ctx.parallel_for(
          rows, std::max<int64_t>(1, 8192 / std::max<int64_t>(D, 1)), [&](int64_t r0, int64_t r1) {
            for (int64_t r = r0; r < r1; ++r) {
              const T* xr = xp + r * D;
              T* yr = yp + r * D;
              const auto [m, v] = row_moments(xr, D);
              const double inv = 1.0 / std::sqrt(v + static_cast<double>(epsilon_));
              const Ct mean = static_cast<Ct>(m), inv_std = static_cast<Ct>(inv);
              if (bp)
                for (int64_t d = 0; d < D; ++d)
                  yr[d] = store_as<T>((load_as<Ct>(xr[d]) - mean) * inv_std * sp[d] + bp[d]);
              else
                for (int64_t d = 0; d < D; ++d)
                  yr[d] = store_as<T>((load_as<Ct>(xr[d]) - mean) * inv_std * sp[d]);
              if (mp) mp[r] = mean;
              if (ip) ip[r] = inv_std;
            }
          });
    });
  }

 private:
  int64_t axis_;
  float epsilon_;
};

DPRUN_REGISTER_KERNEL({.op_type = "LayerNormalization",
                       .since = 1,
                       .factory = make_kernel<LayerNormKernel>});

}  // namespace
}  // namespace dprun
