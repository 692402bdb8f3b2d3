// ConvWeightGrad (rewrite domain, float32): the weight gradient of a Conv of any group (grouped
// and depthwise ones through oneDNN's grouped weights), as oneDNN's backward-weights primitive
// on the forward convolution's own geometry. The contract is in engine/rewrites/op_fusion.h.
#include <algorithm>
#include <cstring>
#include <vector>

#include "engine/kernel.h"
#include "engine/rewrites/rewrite_domain.h"
#include "ops/conv/conv_backward_weights.h"
#include "ops/conv/conv_weight_grad_util.h"
#include "ops/cpu/onednn_util.h"

namespace dprun {
namespace {

// dW[m, c, k] = sum over n and o of dY[n, m, o] * X[n, group_of(m) * C + c, o * stride +
// k * dilation - pad] (C = dW's channels) for every k of dW's window, directly: for shapes that
// are not a convolution's and its output's, which the backward-weights primitive does not take.
void weight_gradient_by_definition(const WindowGeometry& g, int64_t group, const Tensor& x,
                                   const Tensor& dy, Tensor& dw) {
  const size_t nd = g.rank();
  const int64_t n = x.dim(0), x_channels = x.dim(1), m = dy.dim(1);
  const int64_t c = x_channels / group, m_per_group = m / group;
  const Shape window(dw.shape().begin() + 2, dw.shape().end());
  const Shape out(dy.shape().begin() + 2, dy.shape().end());
  const int64_t kernel_size = shape_numel(window), out_size = shape_numel(out);
  const int64_t in_size = shape_numel(Shape(x.shape().begin() + 2, x.shape().end()));
  const float* xs = x.data<float>();
  const float* dys = dy.data<float>();
  float* dws = dw.data<float>();
  std::vector<int64_t> k(nd), o(nd);
  for (int64_t mi = 0; mi < m; ++mi)
    for (int64_t ci = 0; ci < c; ++ci)
      for (int64_t kf = 0; kf < kernel_size; ++kf) {
        for (size_t a = nd, rest = kf; a-- > 0; rest /= window[a]) k[a] = rest % window[a];
        double sum = 0;
        for (int64_t of = 0; of < out_size; ++of) {
          int64_t offset = 0;
          bool inside = true;
          for (size_t a = nd, rest = of; a-- > 0 && inside; rest /= out[a]) {
            o[a] = rest % out[a];
            const int64_t pos = o[a] * g.strides[a] + k[a] * g.dilations[a] - g.pads_begin[a];
            inside = pos >= 0 && pos < g.in[a];
          }
          if (!inside) continue;
          for (size_t a = 0; a < nd; ++a)
            offset =
                offset * g.in[a] + o[a] * g.strides[a] + k[a] * g.dilations[a] - g.pads_begin[a];
          const int64_t xc = mi / m_per_group * c + ci;
          for (int64_t ni = 0; ni < n; ++ni)
            sum += static_cast<double>(dys[(ni * m + mi) * out_size + of]) *
                   xs[(ni * x_channels + xc) * in_size + offset];
        }
        dws[(mi * c + ci) * kernel_size + kf] = static_cast<float>(sum);
      }
}

class ConvWeightGradKernel : public OpKernel {
 public:
  explicit ConvWeightGradKernel(const KernelInfo& info) {
    attrs_.parse(info.node);
    group_ = info.node.attr_int("group", 1);
    if (attrs_.kernel_shape.empty()) info.node.fail("kernel_shape is required");
    if (attrs_.auto_pad != AutoPad::NotSet) info.node.fail("auto_pad must be NOTSET");
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    const Tensor& dy = ctx.input(1);
    const WeightGradShapes s = weight_grad_shapes(ctx, attrs_, group_, x, dy);
    Tensor& dw = ctx.allocate_output(0, s.dw_shape, DType::Float32);
    if (dw.numel() == 0) return;
    if (x.numel() == 0 || dy.numel() == 0) {  // an empty batch adds nothing
      std::memset(dw.raw_data(), 0, dw.nbytes());
      return;
    }
    if (!s.is_convolution_output) return weight_gradient_by_definition(s.g, group_, x, dy, dw);
    auto p = cache_.get(onednn::shape_key({&x.shape(), &dy.shape()}), [&] {
      return std::make_shared<onednn::ConvBackwardWeightsPrimitive>(
          onednn::build_weight_gradient(x.shape(), dy.shape(), s.g, group_));
    });
    if (!p->usable) return weight_gradient_by_definition(s.g, group_, x, dy, dw);
    onednn::execute_backward_weights(ctx, *p, x, dy, dw);
  }

 private:
  WindowAttrs attrs_;
  int64_t group_ = 1;
  onednn::ShapeCache<onednn::ConvBackwardWeightsPrimitive> cache_;
};

DPRUN_REGISTER_KERNEL({.domain = kRewriteDomain,
                       .op_type = "ConvWeightGrad",
                       .dtypes = {DType::Float32},
                       .factory = make_kernel<ConvWeightGradKernel>});

}  // namespace
}  // namespace dprun
