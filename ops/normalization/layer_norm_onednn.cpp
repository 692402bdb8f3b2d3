// oneDNN fast path for float32 LayerNormalization. oneDNN normalizes over the last dimension,
// and the normalized dimensions X.shape[axis:] are the trailing, contiguous ones, so X is
// viewed as [rows, D]. Scale and B must have the full normalized size (a broadcast parameter
// runs the reference kernel). The optional Mean and InvStdDev outputs come from the training
// form, which outputs the statistics (InvStdDev is derived from the variance).
#include <algorithm>
#include <cmath>
#include <unordered_map>
#include <vector>

#include "engine/kernel.h"
#include "ops/cpu/onednn_util.h"

namespace dprun {
namespace {

using dnnl::memory;

struct LnormPrimitive {
  bool usable = false;  // false: oneDNN rejected this shape, run the reference kernel
  dnnl::layer_normalization_forward prim;
  memory::desc data_md, stat_md, param_md, scratchpad_md;
};

/// True when `param` is float32 and equals `target` up to leading 1s (no broadcasting).
bool full_param(const Tensor& param, const Shape& target) {
  const Shape& ps = param.shape();
  if (param.dtype() != DType::Float32 || ps.size() > target.size() ||
      param.numel() != shape_numel(target))
    return false;
  return std::equal(ps.begin(), ps.end(), target.end() - static_cast<std::ptrdiff_t>(ps.size()));
}

class LayerNormOnednnKernel : public OpKernel {
 public:
  explicit LayerNormOnednnKernel(const KernelInfo& info)
      : reference_(onednn::make_reference(info)),
        axis_(info.node.attr_int("axis", -1)),
        epsilon_(info.node.attr_float("epsilon", 1e-5f)) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    const int64_t rank = x.rank();
    if (x.dtype() != DType::Float32 || axis_ < -rank || axis_ >= rank || x.numel() == 0)
      return reference_->compute(ctx);  // reports a bad axis
    const int64_t a = axis_ < 0 ? axis_ + rank : axis_;
    const Shape norm_shape(x.shape().begin() + a, x.shape().end());
    const int64_t D = shape_numel(norm_shape);
    const int64_t rows = x.numel() / D;
    const Tensor& scale = ctx.input(1);
    const Tensor* bias = ctx.optional_input(2);
    if (!full_param(scale, norm_shape) || (bias && !full_param(*bias, norm_shape)))
      return reference_->compute(ctx);
    const bool want_mean = ctx.output_count() > 1 && ctx.output_wanted(1);
    const bool want_inv = ctx.output_count() > 2 && ctx.output_wanted(2);
    const bool stats = want_mean || want_inv;
    const std::vector<int64_t> key = {rows, D, bias != nullptr, stats};
    auto p = cache_.get(key, [&] { return build(rows, D, bias != nullptr, stats); });
    if (!p->usable) return reference_->compute(ctx);

    Tensor& y = ctx.allocate_output(0, x.shape(), DType::Float32);
    using onednn::wrap;
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, wrap(p->data_md, x.raw_data())},
                                         {DNNL_ARG_DST, wrap(p->data_md, y.raw_data())},
                                         {DNNL_ARG_SCALE, wrap(p->param_md, scale.raw_data())}};
    if (bias) args.emplace(DNNL_ARG_SHIFT, wrap(p->param_md, bias->raw_data()));
    std::vector<float> mean, var;
    Shape stat_shape(x.shape().begin(), x.shape().begin() + a);
    stat_shape.resize(static_cast<size_t>(rank), 1);
    float* mean_ptr = nullptr;
    if (stats) {
      if (want_mean) {
        mean_ptr = ctx.allocate_output(1, stat_shape, DType::Float32).data<float>();
      } else {
        mean.resize(static_cast<size_t>(rows));
        mean_ptr = mean.data();
      }
      var.resize(static_cast<size_t>(rows));
      args.emplace(DNNL_ARG_MEAN, wrap(p->stat_md, mean_ptr));
      args.emplace(DNNL_ARG_VARIANCE, wrap(p->stat_md, var.data()));
    }
    onednn::execute(p->prim, p->scratchpad_md, std::move(args));
    if (want_inv) {
      float* inv = ctx.allocate_output(2, stat_shape, DType::Float32).data<float>();
      for (int64_t r = 0; r < rows; ++r)
        inv[r] = static_cast<float>(1.0 / std::sqrt(static_cast<double>(var[r]) + epsilon_));
    }
  }

 private:
  std::shared_ptr<const LnormPrimitive> build(int64_t rows, int64_t D, bool has_bias,
                                              bool stats) const {
    auto p = std::make_shared<LnormPrimitive>();
    try {
      p->data_md = onednn::plain_desc({rows, D});
      p->stat_md = onednn::plain_desc({rows});
      p->param_md = onednn::plain_desc({D});
      auto flags = dnnl::normalization_flags::use_scale;
      if (has_bias) flags |= dnnl::normalization_flags::use_shift;
      dnnl::layer_normalization_forward::desc desc(
          stats ? dnnl::prop_kind::forward_training : dnnl::prop_kind::forward_inference,
          p->data_md, p->stat_md, epsilon_, flags);
      dnnl::layer_normalization_forward::primitive_desc pd(desc, onednn::concurrent_attr(),
                                                           onednn::cpu_engine());
      p->scratchpad_md = pd.scratchpad_desc();
      p->prim = dnnl::layer_normalization_forward(pd);
      p->usable = true;
    } catch (const dnnl::error&) {
      p->usable = false;
    }
    return p;
  }

  std::unique_ptr<OpKernel> reference_;
  int64_t axis_;
  float epsilon_;
  onednn::ShapeCache<LnormPrimitive> cache_;
};

DPRUN_REGISTER_KERNEL({.op_type = "LayerNormalization",
                       .since = 1,
                       .dtypes = {DType::Float32},
                       .priority = 10,
                       .impl = "onednn",
                       .factory = make_kernel<LayerNormOnednnKernel>});

}  // namespace
}  // namespace dprun
