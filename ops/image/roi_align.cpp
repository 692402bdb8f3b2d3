// RoiAlign: average (or max) of bilinearly sampled points in each output bin of each region.
// Opset 10 behaves like coordinate_transformation_mode "output_half_pixel" (no half-pixel
// offset, regions at least one pixel); opset 16 defaults to "half_pixel".
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "engine/op_facts.h"
#include "ops/common/reduce_common.h"

namespace dprun {
namespace {

class RoiAlignKernel : public OpKernel {
 public:
  explicit RoiAlignKernel(const KernelInfo& info) {
    const Node& node = info.node;
    std::string mode = node.attr_string("mode", "avg");
    if (mode == "max")
      max_mode_ = true;
    else if (mode != "avg")
      node.fail("mode must be 'avg' or 'max', got '", mode, "'");
    out_h_ = node.attr_int("output_height", 1);
    out_w_ = node.attr_int("output_width", 1);
    sampling_ratio_ = node.attr_int("sampling_ratio", 0);
    spatial_scale_ = node.attr_float("spatial_scale", 1.f);
    std::string ctm = node.attr_string("coordinate_transformation_mode",
                                       info.opset >= 16 ? "half_pixel" : "output_half_pixel");
    if (ctm == "half_pixel")
      half_pixel_ = true;
    else if (ctm != "output_half_pixel")
      node.fail("unknown coordinate_transformation_mode '", ctm, "'");
    if (out_h_ <= 0 || out_w_ <= 0) node.fail("output_height and output_width must be positive");
    if (sampling_ratio_ < 0) node.fail("sampling_ratio must be >= 0");
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    const Tensor& rois = ctx.input(1);
    const Tensor& bi = ctx.input(2);
    if (x.rank() != 4) ctx.fail("X must be [N, C, H, W], got ", shape_to_string(x.shape()));
    if (rois.rank() != 2 || rois.dim(1) != 4)
      ctx.fail("rois must be [num_rois, 4], got ", shape_to_string(rois.shape()));
    if (bi.rank() != 1 || bi.dim(0) != rois.dim(0))
      ctx.fail("batch_indices must be [", rois.dim(0), "], got ", shape_to_string(bi.shape()));
    if (rois.dtype() != x.dtype()) ctx.fail("rois dtype differs from X dtype");
    const int64_t C = x.dim(1), H = x.dim(2), W = x.dim(3), R = rois.dim(0);
    const std::vector<int64_t> batch = read_int_list(ctx, bi, "batch_indices");
    for (int64_t b : batch)
      if (b < 0 || b >= x.dim(0)) ctx.fail("batch index ", b, " is outside [0, ", x.dim(0), ")");
    Tensor& y = ctx.allocate_output(0, {R, C, out_h_, out_w_}, x.dtype());
    visit_dtype(x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      if constexpr (std::is_floating_point_v<T>) {
        const T* xs = x.data<T>();
        const T* rs = rois.data<T>();
        T* out = y.data<T>();
        ctx.parallel_for(R * C, 1, [&](int64_t begin, int64_t end) {
          for (int64_t rc = begin; rc < end; ++rc) {
            const int64_t r = rc / C, c = rc % C;
            const T* img = xs + (batch[static_cast<size_t>(r)] * C + c) * H * W;
            const double off = half_pixel_ ? 0.5 : 0.0;
            const double x1 = rs[r * 4] * spatial_scale_ - off,
                         y1 = rs[r * 4 + 1] * spatial_scale_ - off;
            const double x2 = rs[r * 4 + 2] * spatial_scale_ - off,
                         y2 = rs[r * 4 + 3] * spatial_scale_ - off;
            double rw = x2 - x1, rh = y2 - y1;
            if (!half_pixel_) {
              rw = std::max(rw, 1.0);
              rh = std::max(rh, 1.0);
            }
            const double bh = rh / static_cast<double>(out_h_),
                         bw = rw / static_cast<double>(out_w_);
            const int64_t gh = sampling_ratio_ > 0 ? sampling_ratio_
                                                   : static_cast<int64_t>(std::ceil(rh / out_h_));
            const int64_t gw = sampling_ratio_ > 0 ? sampling_ratio_
                                                   : static_cast<int64_t>(std::ceil(rw / out_w_));
            const double count = static_cast<double>(std::max<int64_t>(gh * gw, 1));
            for (int64_t ph = 0; ph < out_h_; ++ph)
              for (int64_t pw = 0; pw < out_w_; ++pw) {
                double acc = 0;
                bool first = true;
                for (int64_t iy = 0; iy < gh; ++iy) {
                  const double yy = y1 + ph * bh + (iy + 0.5) * bh / static_cast<double>(gh);
                  for (int64_t ix = 0; ix < gw; ++ix) {
                    const double xx = x1 + pw * bw + (ix + 0.5) * bw / static_cast<double>(gw);
                    double v = 0;
                    if (!(yy < -1.0 || yy > H || xx < -1.0 || xx > W)) {
                      double sy = std::max(yy, 0.0), sx = std::max(xx, 0.0);
                      int64_t y0 = static_cast<int64_t>(sy), x0 = static_cast<int64_t>(sx), y_hi,
                              x_hi;
                      if (y0 >= H - 1) {
                        y0 = y_hi = H - 1;
                        sy = static_cast<double>(y0);
                      } else {
                        y_hi = y0 + 1;
                      }
                      if (x0 >= W - 1) {
                        x0 = x_hi = W - 1;
                        sx = static_cast<double>(x0);
                      } else {
                        x_hi = x0 + 1;
                      }
                      const double ly = sy - y0, lx = sx - x0, hy = 1 - ly, hx = 1 - lx;
                      const double p1 = hy * hx * img[y0 * W + x0],
                                   p2 = hy * lx * img[y0 * W + x_hi];
                      const double p3 = ly * hx * img[y_hi * W + x0],
                                   p4 = ly * lx * img[y_hi * W + x_hi];
                      v = max_mode_ ? std::max({p1, p2, p3, p4}) : p1 + p2 + p3 + p4;
                    }
                    if (max_mode_)
                      acc = first ? v : std::max(acc, v);
                    else
                      acc += v;
                    first = false;
                  }
                }
                out[(rc * out_h_ + ph) * out_w_ + pw] =
                    static_cast<T>(max_mode_ ? acc : acc / count);
              }
          }
        });
      } else {
        ctx.fail("X must be float32 or float64, got ", dtype_name(x.dtype()));
      }
    });
  }

 private:
  bool max_mode_ = false, half_pixel_ = false;
  int64_t out_h_ = 1, out_w_ = 1, sampling_ratio_ = 0;
  double spatial_scale_ = 1;
};

DPRUN_REGISTER_KERNEL({.op_type = "RoiAlign",
                       .since = 10,
                       .dtypes = kFloatTypes,
                       .factory = make_kernel<RoiAlignKernel>});

}  // namespace
}  // namespace dprun

// The ops' facts (engine/op_facts.h): output types, shapes, 16-bit and layout policy.
namespace dprun {
namespace {
// Kept in float32: box coordinates: positions 16 bits would round.
DPRUN_REGISTER_OP_FACTS({.op_type = "RoiAlign", .float32_only = true});

}  // namespace
}  // namespace dprun
