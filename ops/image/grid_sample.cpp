// GridSample over 2-D images: X [N, C, H, W] sampled at Grid [N, H_out, W_out, 2] holding
// normalized (x, y) in [-1, 1]. Modes: nearest, bilinear/linear, bicubic/cubic (opset 20
// spellings accepted); padding: zeros, border, reflection.
#include <algorithm>
#include <cmath>
#include <string>

#include "engine/op_facts.h"
#include "ops/common/reduce_common.h"

namespace dprun {
namespace {

enum class GsMode { Nearest, Linear, Cubic };
enum class GsPad { Zeros, Border, Reflection };

double gs_reflect(double x, double lo, double hi) {
  const double range = hi - lo;
  if (range <= 0) return lo;
  if (x < lo) {
    const double dx = lo - x;
    const int64_t n = static_cast<int64_t>(dx / range);
    const double r = dx - static_cast<double>(n) * range;
    return n % 2 == 0 ? lo + r : hi - r;
  }
  if (x > hi) {
    const double dx = x - hi;
    const int64_t n = static_cast<int64_t>(dx / range);
    const double r = dx - static_cast<double>(n) * range;
    return n % 2 == 0 ? hi - r : lo + r;
  }
  return x;
}

void cubic_coeffs(double t, double c[4]) {
  constexpr double A = -0.75;
  const double x = std::abs(t);
  c[0] = ((A * (x + 1) - 5 * A) * (x + 1) + 8 * A) * (x + 1) - 4 * A;
  c[1] = ((A + 2) * x - (A + 3)) * x * x + 1;
  c[2] = ((A + 2) * (1 - x) - (A + 3)) * (1 - x) * (1 - x) + 1;
  c[3] = ((A * (2 - x) - 5 * A) * (2 - x) + 8 * A) * (2 - x) - 4 * A;
}

class GridSampleKernel : public OpKernel {
 public:
  explicit GridSampleKernel(const KernelInfo& info) {
    const Node& node = info.node;
    std::string mode = node.attr_string("mode", info.opset >= 20 ? "linear" : "bilinear");
    if (mode == "nearest")
      mode_ = GsMode::Nearest;
    else if (mode == "bilinear" || mode == "linear")
      mode_ = GsMode::Linear;
    else if (mode == "bicubic" || mode == "cubic")
      mode_ = GsMode::Cubic;
    else
      node.fail("unknown mode '", mode, "'");
    std::string pad = node.attr_string("padding_mode", "zeros");
    if (pad == "zeros")
      pad_ = GsPad::Zeros;
    else if (pad == "border")
      pad_ = GsPad::Border;
    else if (pad == "reflection")
      pad_ = GsPad::Reflection;
    else
      node.fail("unknown padding_mode '", pad, "'");
    align_corners_ = node.attr_int("align_corners", 0) != 0;
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    const Tensor& grid = ctx.input(1);
    if (x.rank() != 4)
      ctx.fail("only 2-D sampling is supported: X must be [N, C, H, W], got ",
               shape_to_string(x.shape()));
    if (grid.rank() != 4 || grid.dim(0) != x.dim(0) || grid.dim(3) != 2)
      ctx.fail("Grid must be [", x.dim(0), ", H_out, W_out, 2], got ",
               shape_to_string(grid.shape()));
    if (grid.dtype() != x.dtype()) ctx.fail("Grid dtype differs from X dtype");
    const int64_t N = x.dim(0), C = x.dim(1), H = x.dim(2), W = x.dim(3);
    const int64_t Ho = grid.dim(1), Wo = grid.dim(2);
    Tensor& y = ctx.allocate_output(0, {N, C, Ho, Wo}, x.dtype());
    visit_dtype(x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      if constexpr (std::is_floating_point_v<T>) {
        const T* xs = x.data<T>();
        const T* gs = grid.data<T>();
        T* out = y.data<T>();
        const double xmin = align_corners_ ? 0 : -0.5, xmax = align_corners_ ? W - 1 : W - 0.5;
        const double ymin = align_corners_ ? 0 : -0.5, ymax = align_corners_ ? H - 1 : H - 0.5;
        auto denorm = [&](double v, int64_t len) {
          return align_corners_ ? (v + 1) / 2 * static_cast<double>(len - 1)
                                : ((v + 1) * static_cast<double>(len) - 1) / 2;
        };
        ctx.parallel_for(N * C, 1, [&](int64_t begin, int64_t end) {
          for (int64_t nc = begin; nc < end; ++nc) {
            const int64_t n = nc / C;
            const T* img = xs + nc * H * W;
            auto pixel = [&](int64_t r, int64_t c) -> double {
              switch (pad_) {
                case GsPad::Zeros:
                  return (r >= 0 && r < H && c >= 0 && c < W) ? static_cast<double>(img[r * W + c])
                                                              : 0.0;
                case GsPad::Border:
                  r = std::clamp<int64_t>(r, 0, H - 1);
                  c = std::clamp<int64_t>(c, 0, W - 1);
                  return img[r * W + c];
                case GsPad::Reflection:
                  r = static_cast<int64_t>(gs_reflect(static_cast<double>(r), ymin, ymax));
                  c = static_cast<int64_t>(gs_reflect(static_cast<double>(c), xmin, xmax));
                  r = std::clamp<int64_t>(r, 0, H - 1);
                  c = std::clamp<int64_t>(c, 0, W - 1);
                  return img[r * W + c];
              }
              return 0.0;
            };
            for (int64_t oy = 0; oy < Ho; ++oy)
              for (int64_t ox = 0; ox < Wo; ++ox) {
                const T* g = gs + ((n * Ho + oy) * Wo + ox) * 2;
                double fx = denorm(static_cast<double>(g[0]), W);
                double fy = denorm(static_cast<double>(g[1]), H);
                if (mode_ == GsMode::Nearest) {
                  fx = std::nearbyint(fx);
                  fy = std::nearbyint(fy);
                }
                if (pad_ == GsPad::Border) {
                  fx = std::clamp(fx, 0.0, static_cast<double>(W - 1));
                  fy = std::clamp(fy, 0.0, static_cast<double>(H - 1));
                } else if (pad_ == GsPad::Reflection) {
                  fx = gs_reflect(fx, xmin, xmax);
                  fy = gs_reflect(fy, ymin, ymax);
                }
                double v = 0;
                if (mode_ == GsMode::Nearest) {
                  v = pixel(static_cast<int64_t>(std::nearbyint(fy)),
                            static_cast<int64_t>(std::nearbyint(fx)));
                } else if (mode_ == GsMode::Linear) {
                  const double x0 = std::floor(fx), y0 = std::floor(fy);
                  const double dx = fx - x0, dy = fy - y0;
                  const int64_t ix = static_cast<int64_t>(x0), iy = static_cast<int64_t>(y0);
                  v = (1 - dy) * ((1 - dx) * pixel(iy, ix) + dx * pixel(iy, ix + 1)) +
                      dy * ((1 - dx) * pixel(iy + 1, ix) + dx * pixel(iy + 1, ix + 1));
                } else {
                  const double x0 = std::floor(fx) - 1, y0 = std::floor(fy) - 1;
                  double cx[4], cy[4];
                  cubic_coeffs(fx - x0 - 1, cx);
                  cubic_coeffs(fy - y0 - 1, cy);
                  const int64_t ix = static_cast<int64_t>(x0), iy = static_cast<int64_t>(y0);
                  for (int64_t a = 0; a < 4; ++a) {
                    double row = 0;
                    for (int64_t b = 0; b < 4; ++b) row += cx[b] * pixel(iy + a, ix + b);
                    v += cy[a] * row;
                  }
                }
                out[(nc * Ho + oy) * Wo + ox] = static_cast<T>(v);
              }
          }
        });
      } else {
        ctx.fail("X must be float32 or float64, got ", dtype_name(x.dtype()));
      }
    });
  }

 private:
  GsMode mode_ = GsMode::Linear;
  GsPad pad_ = GsPad::Zeros;
  bool align_corners_ = false;
};

DPRUN_REGISTER_KERNEL({.op_type = "GridSample",
                       .since = 16,
                       .dtypes = kFloatTypes,
                       .factory = make_kernel<GridSampleKernel>});

}  // namespace
}  // namespace dprun

// The ops' facts (engine/op_facts.h): output types, shapes, 16-bit and layout policy.
namespace dprun {
namespace {
DPRUN_REGISTER_OP_FACTS({.op_type = "GridSample"});

}  // namespace
}  // namespace dprun
