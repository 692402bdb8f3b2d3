// Resize (opsets 10, 11, 13, 18, 19) and Upsample (opsets 1, 7, 9): separable nearest,
// n-linear and cubic interpolation with every coordinate transformation mode. The coordinate
// arithmetic (which input positions, with which weights, make each output position) lives in
// resize_coordinates.h, shared with the gradient rule.
#include <algorithm>
#include <cmath>
#include <vector>

#include "engine/kernel.h"
#include "engine/op_facts.h"
#include "ops/image/resize_coordinates.h"

namespace dprun {
namespace {

using resize::AxisTaps;
using resize::Tap;

class ResizeKernel : public OpKernel {
 public:
  explicit ResizeKernel(const KernelInfo& info)
      : attrs_(resize::parse_attributes(info.node, info.opset)) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    const int64_t rank = x.rank();
    if (rank == 0) ctx.fail("X must have rank >= 1");
    const std::vector<int64_t> axes = resize::resized_axes(attrs_, rank, ctx.node());

    // Scales and sizes, given for `axes`.
    std::vector<double> scales, roi;
    std::vector<int64_t> sizes;
    if (!attrs_.scales_from_input()) {
      scales.assign(attrs_.legacy_scales.begin(), attrs_.legacy_scales.end());
    } else if (!attrs_.has_roi_and_sizes()) {
      read_floats(ctx, ctx.input(1), "scales", scales);
    } else {
      if (const Tensor* r = ctx.optional_input(1);
          r && attrs_.coord == resize::Coord::TfCropAndResize)
        read_floats(ctx, *r, "roi", roi);
      if (const Tensor* s = ctx.optional_input(2); s && s->numel() > 0)
        read_floats(ctx, *s, "scales", scales);
      if (const Tensor* s = ctx.optional_input(3); s && s->numel() > 0) {
        if (s->dtype() != DType::Int64) ctx.fail("sizes must be int64, got ", s->describe());
        sizes.assign(s->data<int64_t>(), s->data<int64_t>() + s->numel());
      }
      if (scales.empty() == sizes.empty())
        ctx.fail("exactly one of scales and sizes must be given");
    }
    const std::vector<int64_t> in(x.shape().begin(), x.shape().end());
    const resize::Geometry g = resize::geometry(attrs_, in, axes, scales, sizes, roi, ctx.node());
    Tensor& y = ctx.allocate_output(0, Shape(g.out.begin(), g.out.end()), x.dtype());
    if (y.numel() == 0) return;
    if (x.numel() == 0) ctx.fail("cannot resize an empty input to a non-empty output");
    std::vector<AxisTaps> taps;
    for (size_t d = 0; d < in.size(); ++d) taps.push_back(resize::axis_taps(attrs_, g, in, d));
    visit_numeric_dtype(x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      interpolate<T>(ctx.execution(), x, y, taps);
    });
  }

 private:
  static void read_floats(const KernelContext& ctx, const Tensor& t, const char* what,
                          std::vector<double>& out) {
    if (!is_floating(t.dtype())) ctx.fail(what, " must be floating point, got ", t.describe());
    out.resize(static_cast<size_t>(t.numel()));
    for (int64_t i = 0; i < t.numel(); ++i) out[static_cast<size_t>(i)] = t.item_as_double(i);
  }

  template <class T>
  void interpolate(const ExecutionContext& exec, const Tensor& x, Tensor& y,
                   const std::vector<AxisTaps>& taps) const {
    const size_t rank = taps.size();
    const Shape& in = x.shape();
    const Shape& out = y.shape();
    std::vector<int64_t> in_strides(rank, 1);
    for (size_t d = rank - 1; d-- > 0;) in_strides[d] = in_strides[d + 1] * in[d + 1];
    const T* xp = x.data<T>();
    T* yp = y.data<T>();
    const int64_t inner = out[rank - 1];
    const int64_t rows = y.numel() / inner;
    const AxisTaps& last = taps[rank - 1];
    const T extrapolation = static_cast<T>(attrs_.extrapolation);
    exec.parallel_for(rows, std::max<int64_t>(1, 4096 / inner), [&](int64_t begin, int64_t end) {
      std::vector<int64_t> idx(rank);
      std::vector<Tap> combos, next;
      for (int64_t row = begin; row < end; ++row) {
        int64_t rest = row;
        for (size_t d = rank - 1; d-- > 0;) {
          idx[d] = rest % out[d];
          rest /= out[d];
        }
        // The weighted input offsets contributed by all axes but the last.
        combos.assign(1, Tap{0, 1.0});
        bool outside = false;
        for (size_t d = 0; d + 1 < rank; ++d) {
          const size_t o = static_cast<size_t>(idx[d]);
          outside = outside || taps[d].outside[o];
          next.clear();
          for (const Tap& c : combos)
            for (const Tap& t : taps[d].taps[o])
              next.push_back({c.index + t.index * in_strides[d], c.weight * t.weight});
          combos.swap(next);
        }
        T* yrow = yp + row * inner;
        for (int64_t j = 0; j < inner; ++j) {
          if (outside || last.outside[static_cast<size_t>(j)]) {
            yrow[j] = extrapolation;
            continue;
          }
          const auto& lt = last.taps[static_cast<size_t>(j)];
          if (combos.size() == 1 && lt.size() == 1 && combos[0].weight == 1.0 &&
              lt[0].weight == 1.0) {
            yrow[j] = xp[combos[0].index + lt[0].index];  // exact copy (nearest)
            continue;
          }
          double acc = 0;
          for (const Tap& c : combos)
            for (const Tap& t : lt)
              acc += c.weight * t.weight * static_cast<double>(xp[c.index + t.index]);
          yrow[j] = static_cast<T>(acc);
        }
      }
    });
  }

  resize::Attributes attrs_;
};

DPRUN_REGISTER_KERNEL({.op_type = "Resize",
                       .since = 10,
                       .dtypes = kNumericTypes,
                       .factory = make_kernel<ResizeKernel>});
DPRUN_REGISTER_KERNEL({.op_type = "Upsample",
                       .since = 1,
                       .until = 9,
                       .dtypes = kNumericTypes,
                       .factory = make_kernel<ResizeKernel>});

}  // namespace
}  // namespace dprun

// The ops' facts (engine/op_facts.h): output types, shapes, 16-bit and layout policy.
namespace dprun {
namespace {
// Kept in float32: its scales input is float-only in the schema.
DPRUN_REGISTER_OP_FACTS({.op_type = "Resize", .shape = ShapeKind::SameRank, .float32_only = true});
// Kept in float32: its scales input is float-only in the schema.
DPRUN_REGISTER_OP_FACTS({.op_type = "Upsample",
                         .shape = ShapeKind::SameRank,
                         .float32_only = true});

}  // namespace
}  // namespace dprun
