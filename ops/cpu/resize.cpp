// Resize (opsets 10, 11, 13, 18, 19) and Upsample (opsets 1, 7, 9): separable nearest,
// n-linear and cubic interpolation with every coordinate transformation mode.
#include <algorithm>
#include <cmath>
#include <vector>

#include "engine/kernel.h"

namespace dprun {
namespace {

enum class Mode { Nearest, Linear, Cubic };
enum class Coord {
  HalfPixel,
  HalfPixelSymmetric,
  PytorchHalfPixel,
  AlignCorners,
  Asymmetric,
  TfHalfPixelForNn,
  TfCropAndResize
};
// Simple: the pre-opset-11 rule (ceil when downsampling, floor otherwise).
enum class NearestMode { RoundPreferFloor, RoundPreferCeil, Floor, Ceil, Simple };
enum class AspectPolicy { Stretch, NotLarger, NotSmaller };

/// One interpolation tap along an axis: an input index and its weight.
struct Tap {
  int64_t index;
  double weight;
};

/// The taps of every output position along one axis; `outside` marks positions that map
/// outside the input under tf_crop_and_resize (they take extrapolation_value).
struct AxisTaps {
  std::vector<std::vector<Tap>> taps;
  std::vector<bool> outside;
};

double cubic_weight(double x, double a) {
  x = std::abs(x);
  if (x <= 1) return ((a + 2) * x - (a + 3)) * x * x + 1;
  if (x < 2) return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
  return 0;
}

class ResizeKernel : public OpKernel {
 public:
  explicit ResizeKernel(const KernelInfo& info) : opset_(info.opset) {
    const Node& node = info.node;
    upsample_ = node.op_type == "Upsample";
    std::string mode = node.attr_string("mode", "nearest");
    if (mode == "nearest")
      mode_ = Mode::Nearest;
    else if (mode == "linear" || mode == "bilinear")
      mode_ = Mode::Linear;
    else if (mode == "cubic" && !upsample_)
      mode_ = Mode::Cubic;
    else
      node.fail("unsupported mode '", mode, "'");
    if (upsample_ || opset_ < 11) {
      // Before opset 11 the only transformation was asymmetric with the "simple" rounding.
      coord_ = Coord::Asymmetric;
      nearest_ = NearestMode::Simple;
      if (upsample_ && opset_ < 7) {
        legacy_scales_ = {1.f, 1.f, node.attr_float("height_scale"),
                          node.attr_float("width_scale")};
      } else if (upsample_ && opset_ < 9) {
        legacy_scales_ = node.attr_floats("scales");
      }
      return;
    }
    std::string ctm = node.attr_string("coordinate_transformation_mode", "half_pixel");
    if (ctm == "half_pixel")
      coord_ = Coord::HalfPixel;
    else if (ctm == "half_pixel_symmetric" && opset_ >= 19)
      coord_ = Coord::HalfPixelSymmetric;
    else if (ctm == "pytorch_half_pixel")
      coord_ = Coord::PytorchHalfPixel;
    else if (ctm == "align_corners")
      coord_ = Coord::AlignCorners;
    else if (ctm == "asymmetric")
      coord_ = Coord::Asymmetric;
    else if (ctm == "tf_half_pixel_for_nn" && opset_ < 13)
      coord_ = Coord::TfHalfPixelForNn;
    else if (ctm == "tf_crop_and_resize")
      coord_ = Coord::TfCropAndResize;
    else
      node.fail("unsupported coordinate_transformation_mode '", ctm, "' at opset ", opset_);
    std::string nm = node.attr_string("nearest_mode", "round_prefer_floor");
    if (nm == "round_prefer_floor")
      nearest_ = NearestMode::RoundPreferFloor;
    else if (nm == "round_prefer_ceil")
      nearest_ = NearestMode::RoundPreferCeil;
    else if (nm == "floor")
      nearest_ = NearestMode::Floor;
    else if (nm == "ceil")
      nearest_ = NearestMode::Ceil;
    else
      node.fail("unsupported nearest_mode '", nm, "'");
    cubic_a_ = node.attr_float("cubic_coeff_a", -0.75f);
    exclude_outside_ = node.attr_int("exclude_outside", 0) != 0;
    extrapolation_ = node.attr_float("extrapolation_value", 0.f);
    if (opset_ >= 18) {
      antialias_ = node.attr_int("antialias", 0) != 0;
      axes_ = node.attr_ints("axes", {});
      std::string policy = node.attr_string("keep_aspect_ratio_policy", "stretch");
      if (policy == "stretch")
        policy_ = AspectPolicy::Stretch;
      else if (policy == "not_larger")
        policy_ = AspectPolicy::NotLarger;
      else if (policy == "not_smaller")
        policy_ = AspectPolicy::NotSmaller;
      else
        node.fail("unsupported keep_aspect_ratio_policy '", policy, "'");
    }
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    const int64_t rank = x.rank();
    if (rank == 0) ctx.fail("X must have rank >= 1");
    std::vector<int64_t> axes;
    for (int64_t a : axes_) axes.push_back(normalize_axis(a, rank));
    if (axes.empty())
      for (int64_t a = 0; a < rank; ++a) axes.push_back(a);
    for (size_t i = 0; i < axes.size(); ++i)
      for (size_t j = 0; j < i; ++j)
        if (axes[i] == axes[j]) ctx.fail("axes contains ", axes[i], " twice");
    const size_t na = axes.size();

    // Scales and sizes, given for `axes`.
    std::vector<double> scales;
    std::vector<int64_t> sizes;
    const Tensor* roi_t = nullptr;
    if (upsample_) {
      if (opset_ >= 9) {
        read_floats(ctx, ctx.input(1), "scales", scales);
      } else {
        scales.assign(legacy_scales_.begin(), legacy_scales_.end());
      }
    } else if (opset_ < 11) {
      read_floats(ctx, ctx.input(1), "scales", scales);
    } else {
      roi_t = ctx.optional_input(1);
      if (const Tensor* s = ctx.optional_input(2); s && s->numel() > 0)
        read_floats(ctx, *s, "scales", scales);
      if (const Tensor* s = ctx.optional_input(3); s && s->numel() > 0) {
        if (s->dtype() != DType::Int64) ctx.fail("sizes must be int64, got ", s->describe());
        sizes.assign(s->data<int64_t>(), s->data<int64_t>() + s->numel());
      }
      if (scales.empty() == sizes.empty())
        ctx.fail("exactly one of scales and sizes must be given");
    }
    if (!scales.empty() && scales.size() != na)
      ctx.fail("scales has ", scales.size(), " values, expected ", na);
    if (!sizes.empty() && sizes.size() != na)
      ctx.fail("sizes has ", sizes.size(), " values, expected ", na);

    std::vector<double> roi_start(static_cast<size_t>(rank), 0.0),
        roi_end(static_cast<size_t>(rank), 1.0);
    if (coord_ == Coord::TfCropAndResize) {
      if (!roi_t || roi_t->numel() != static_cast<int64_t>(2 * na))
        ctx.fail("tf_crop_and_resize needs roi with ", 2 * na, " values");
      std::vector<double> roi;
      read_floats(ctx, *roi_t, "roi", roi);
      for (size_t i = 0; i < na; ++i) {
        roi_start[static_cast<size_t>(axes[i])] = roi[i];
        roi_end[static_cast<size_t>(axes[i])] = roi[i + na];
      }
    }

    // Per-dimension output size and scale (identity on dimensions outside axes).
    std::vector<int64_t> out(x.shape().begin(), x.shape().end());
    std::vector<double> scale(static_cast<size_t>(rank), 1.0);
    // The unrounded resized length: the ONNX reference divides by it (not the rounded output
    // size), which matters for align_corners when the scaled size is fractional.
    std::vector<double> resized(x.shape().begin(), x.shape().end());
    if (!scales.empty()) {
      for (size_t i = 0; i < na; ++i) {
        if (!(scales[i] > 0)) ctx.fail("scales must be positive, got ", scales[i]);
        size_t d = static_cast<size_t>(axes[i]);
        scale[d] = scales[i];
        // With tf_crop_and_resize the scale applies to the cropped extent.
        double extent = static_cast<double>(x.dim(axes[i])) * (roi_end[d] - roi_start[d]);
        resized[d] = extent * scales[i];
        out[d] = static_cast<int64_t>(std::floor(resized[d]));
      }
    } else {
      double common = 0;
      if (policy_ != AspectPolicy::Stretch) {
        common = policy_ == AspectPolicy::NotLarger ? 1e300 : 0;
        for (size_t i = 0; i < na; ++i) {
          double r = static_cast<double>(sizes[i]) / static_cast<double>(x.dim(axes[i]));
          common = policy_ == AspectPolicy::NotLarger ? std::min(common, r) : std::max(common, r);
        }
      }
      for (size_t i = 0; i < na; ++i) {
        size_t d = static_cast<size_t>(axes[i]);
        if (sizes[i] < 0) ctx.fail("sizes must be non-negative, got ", sizes[i]);
        if (policy_ == AspectPolicy::Stretch) {
          out[d] = sizes[i];
          resized[d] = static_cast<double>(sizes[i]);
          scale[d] = x.dim(axes[i])
                         ? static_cast<double>(sizes[i]) / static_cast<double>(x.dim(axes[i]))
                         : 1.0;
        } else {
          scale[d] = common;
          resized[d] = common * static_cast<double>(x.dim(axes[i]));
          out[d] = static_cast<int64_t>(std::round(resized[d]));
        }
      }
    }
    Tensor& y = ctx.allocate_output(0, Shape(out.begin(), out.end()), x.dtype());
    if (y.numel() == 0) return;
    if (x.numel() == 0) ctx.fail("cannot resize an empty input to a non-empty output");
    std::vector<AxisTaps> taps(static_cast<size_t>(rank));
    for (int64_t d = 0; d < rank; ++d)
      taps[static_cast<size_t>(d)] =
          axis_taps(x.dim(d), out[static_cast<size_t>(d)], resized[static_cast<size_t>(d)],
                    scale[static_cast<size_t>(d)], roi_start[static_cast<size_t>(d)],
                    roi_end[static_cast<size_t>(d)]);
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

  /// Maps an output coordinate to the input coordinate along one axis.
  double original_coord(int64_t xr, int64_t len_in, double lo, double scale, double start,
                        double end) const {
    const double x = static_cast<double>(xr), li = static_cast<double>(len_in);
    switch (coord_) {
      case Coord::HalfPixel:
        return (x + 0.5) / scale - 0.5;
      case Coord::HalfPixelSymmetric: {
        double adjustment = lo / (scale * li);
        double center = li / 2;
        return center * (1 - adjustment) + (x + 0.5) / scale - 0.5;
      }
      case Coord::PytorchHalfPixel:
        return lo > 1 ? (x + 0.5) / scale - 0.5 : 0.0;
      case Coord::AlignCorners:
        return lo == 1 ? 0.0 : x * (li - 1) / (lo - 1);
      case Coord::Asymmetric:
        return x / scale;
      case Coord::TfHalfPixelForNn:
        return (x + 0.5) / scale;
      case Coord::TfCropAndResize:
        return lo > 1 ? start * (li - 1) + x * (end - start) * (li - 1) / (lo - 1)
                      : 0.5 * (start + end) * (li - 1);
    }
    return 0;
  }

  int64_t nearest_index(double x, double scale) const {
    switch (nearest_) {
      case NearestMode::RoundPreferFloor:
        return x == std::floor(x) + 0.5 ? static_cast<int64_t>(std::floor(x))
                                        : static_cast<int64_t>(std::round(x));
      case NearestMode::RoundPreferCeil:
        return x == std::floor(x) + 0.5 ? static_cast<int64_t>(std::ceil(x))
                                        : static_cast<int64_t>(std::round(x));
      case NearestMode::Floor:
        return static_cast<int64_t>(std::floor(x));
      case NearestMode::Ceil:
        return static_cast<int64_t>(std::ceil(x));
      case NearestMode::Simple:
        return scale < 1 ? static_cast<int64_t>(std::ceil(x)) : static_cast<int64_t>(x);
    }
    return 0;
  }

  AxisTaps axis_taps(int64_t len_in, int64_t len_out, double resized, double scale, double start,
                     double end) const {
    AxisTaps r;
    r.taps.resize(static_cast<size_t>(len_out));
    r.outside.assign(static_cast<size_t>(len_out), false);
    auto clamp = [&](int64_t i) { return std::clamp<int64_t>(i, 0, len_in - 1); };
    for (int64_t o = 0; o < len_out; ++o) {
      auto& taps = r.taps[static_cast<size_t>(o)];
      // An untouched axis copies its input.
      if (len_in == len_out && scale == 1.0 && coord_ != Coord::TfCropAndResize &&
          coord_ != Coord::TfHalfPixelForNn) {
        taps.push_back({o, 1.0});
        continue;
      }
      const double xo = original_coord(o, len_in, resized, scale, start, end);
      if (coord_ == Coord::TfCropAndResize && (xo < 0 || xo > static_cast<double>(len_in - 1))) {
        r.outside[static_cast<size_t>(o)] = true;
        taps.push_back({0, 0.0});
        continue;
      }
      if (mode_ == Mode::Nearest) {
        taps.push_back({clamp(nearest_index(xo, scale)), 1.0});
        continue;
      }
      const double fl = std::floor(xo), t = xo - fl;
      const int64_t i0 = static_cast<int64_t>(fl);
      const bool aa = antialias_ && scale < 1.0;
      const double s = aa ? scale : 1.0;
      std::vector<Tap> raw;
      if (mode_ == Mode::Linear) {
        // Triangle filter, stretched by 1/scale when antialiasing a downsample.
        const int64_t first = aa ? static_cast<int64_t>(std::floor(-1 / s)) + 1 : 0;
        const int64_t count = aa ? 2 - 2 * first : 2;
        for (int64_t j = first; j < first + count; ++j)
          raw.push_back({i0 + j, std::max(0.0, 1 - std::abs((static_cast<double>(j) - t) * s))});
      } else {
        const int64_t first = aa ? static_cast<int64_t>(std::floor(-2 / s)) + 1 : -1;
        const int64_t count = aa ? 2 - 2 * first : 4;
        for (int64_t j = first; j < first + count; ++j)
          raw.push_back({i0 + j, cubic_weight((static_cast<double>(j) - t) * s, cubic_a_)});
      }
      double total = 0;
      for (auto& tap : raw) {
        if (exclude_outside_ && (tap.index < 0 || tap.index >= len_in)) tap.weight = 0;
        total += tap.weight;
      }
      const bool normalize = aa || exclude_outside_;
      for (auto& tap : raw) {
        if (tap.weight == 0) continue;
        taps.push_back(
            {clamp(tap.index), normalize && total != 0 ? tap.weight / total : tap.weight});
      }
      if (taps.empty()) taps.push_back({clamp(i0), 0.0});
    }
    return r;
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
    const T extrapolation = static_cast<T>(extrapolation_);
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

  int64_t opset_;
  bool upsample_ = false;
  Mode mode_ = Mode::Nearest;
  Coord coord_ = Coord::HalfPixel;
  NearestMode nearest_ = NearestMode::RoundPreferFloor;
  AspectPolicy policy_ = AspectPolicy::Stretch;
  float cubic_a_ = -0.75f;
  bool exclude_outside_ = false;
  float extrapolation_ = 0.f;
  bool antialias_ = false;
  std::vector<int64_t> axes_;
  std::vector<float> legacy_scales_;
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
