// ConvWeightGrad (rewrite domain, float32): the weight gradient of a group-1 Conv, as oneDNN's
// backward-weights primitive on the forward convolution's own geometry. The contract is in
// engine/rewrites/op_fusion.h.
#include <algorithm>
#include <cstring>
#include <vector>

#include "engine/kernel.h"
#include "engine/rewrites/rewrite_domain.h"
#include "ops/cpu/conv_backward_weights.h"
#include "ops/cpu/conv_util.h"
#include "ops/cpu/onednn_util.h"

namespace dprun {
namespace {

// The sizes of the node's result: per spatial axis, the kernel, or fewer where the Conv form
// (a Conv of X by dY dilated by the strides, cropped to the kernel) computes fewer.
std::vector<int64_t> result_window(const KernelContext& ctx, const WindowGeometry& g,
                                   const Shape& dy) {
  std::vector<int64_t> window;
  for (size_t i = 0; i < g.rank(); ++i) {
    const int64_t padded = g.in[i] + g.pads_begin[i] + g.pads_end[i];
    const int64_t dy_extent = (dy[i + 2] - 1) * g.strides[i] + 1;
    if (padded < dy_extent)
      ctx.fail("dY ", shape_to_string(dy), " spans ", dy_extent, " rows of axis ", i + 2,
               " at stride ", g.strides[i], ", more than the ", padded, " of padded X");
    window.push_back(std::min(g.kernel[i], (padded - dy_extent) / g.dilations[i] + 1));
  }
  return window;
}

// dW[m, c, k] = sum over n and o of dY[n, m, o] * X[n, c, o * stride + k * dilation - pad]
// for every k of `window`, directly: for shapes that are not a convolution's and its output's,
// which the backward-weights primitive does not take.
void weight_gradient_by_definition(const WindowGeometry& g, const Tensor& x, const Tensor& dy,
                                   Tensor& dw) {
  const size_t nd = g.rank();
  const int64_t n = x.dim(0), c = x.dim(1), m = dy.dim(1);
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
          for (int64_t ni = 0; ni < n; ++ni)
            sum += static_cast<double>(dys[(ni * m + mi) * out_size + of]) *
                   xs[(ni * c + ci) * in_size + offset];
        }
        dws[(mi * c + ci) * kernel_size + kf] = static_cast<float>(sum);
      }
}

class ConvWeightGradKernel : public OpKernel {
 public:
  explicit ConvWeightGradKernel(const KernelInfo& info) {
    attrs_.parse(info.node);
    if (attrs_.kernel_shape.empty()) info.node.fail("kernel_shape is required");
    if (attrs_.auto_pad != AutoPad::NotSet) info.node.fail("auto_pad must be NOTSET");
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    const Tensor& dy = ctx.input(1);
    if (x.dtype() != DType::Float32 || dy.dtype() != DType::Float32)
      ctx.fail("X and dY must be float32, got ", dtype_name(x.dtype()), " and ",
               dtype_name(dy.dtype()));
    const auto rank = static_cast<int64_t>(attrs_.kernel_shape.size()) + 2;
    if (x.rank() != rank || dy.rank() != rank || x.dim(0) != dy.dim(0))
      ctx.fail("X ", shape_to_string(x.shape()), " and dY ", shape_to_string(dy.shape()),
               " must have rank ", rank, " for kernel_shape ", shape_to_string(attrs_.kernel_shape),
               " and one batch size");
    WindowGeometry g;
    g.in.assign(x.shape().begin() + 2, x.shape().end());
    g.kernel = attrs_.kernel_shape;
    attrs_.fill(ctx.node(), g.kernel.size(), g.strides, g.dilations, g.pads_begin, g.pads_end);
    Shape dw_shape = {dy.dim(1), x.dim(1)};
    const std::vector<int64_t> window = result_window(ctx, g, dy.shape());
    dw_shape.insert(dw_shape.end(), window.begin(), window.end());
    Tensor& dw = ctx.allocate_output(0, dw_shape, DType::Float32);
    if (dw.numel() == 0) return;
    if (x.numel() == 0 || dy.numel() == 0) {  // an empty batch adds nothing
      std::memset(dw.raw_data(), 0, dw.nbytes());
      return;
    }
    if (!is_convolution_output(g, window, dy.shape()))
      return weight_gradient_by_definition(g, x, dy, dw);
    g.out.assign(dy.shape().begin() + 2, dy.shape().end());
    auto p = cache_.get(onednn::shape_key({&x.shape(), &dy.shape()}), [&] {
      return std::make_shared<onednn::ConvBackwardWeightsPrimitive>(
          onednn::build_weight_gradient(x.shape(), dy.shape(), g));
    });
    if (!p->usable) return weight_gradient_by_definition(g, x, dy, dw);
    onednn::execute_backward_weights(ctx, *p, x, dy, dw);
  }

 private:
  // Whether dY's spatial sizes are those of the convolution of X with the whole kernel: the
  // gradient's case, which the backward-weights primitive takes.
  static bool is_convolution_output(const WindowGeometry& g, const std::vector<int64_t>& window,
                                    const Shape& dy) {
    for (size_t i = 0; i < g.rank(); ++i) {
      const int64_t extent = (g.kernel[i] - 1) * g.dilations[i] + 1;
      const int64_t span = g.in[i] + g.pads_begin[i] + g.pads_end[i] - extent;
      if (window[i] != g.kernel[i] || span < 0 || span / g.strides[i] + 1 != dy[i + 2])
        return false;
    }
    return true;
  }

  WindowAttrs attrs_;
  onednn::ShapeCache<onednn::ConvBackwardWeightsPrimitive> cache_;
};

DPRUN_REGISTER_KERNEL({.domain = kRewriteDomain,
                       .op_type = "ConvWeightGrad",
                       .dtypes = {DType::Float32},
                       .factory = make_kernel<ConvWeightGradKernel>});

}  // namespace
}  // namespace dprun
