#pragma once
// The coordinate arithmetic of Resize (opsets 10, 11, 13, 18, 19) and Upsample (opsets 1, 7, 9),
// shared by the CPU kernel (ops/image/resize.cpp) and the gradient rule
// (ops/image/resize_grad.cpp), which builds each axis's interpolation matrix from the very taps the
// kernel sums: one source of truth, so the gradient is the exact transpose of what the forward pass
// computes.
//
// Resize is separable: along each axis, output position o is a weighted sum of a few input
// positions (its taps), given by the coordinate transformation mode, the interpolation mode
// and the scale of that axis.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/graph.h"
#include "engine/shape.h"

namespace dprun::resize {

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

/// A Resize or Upsample node's attributes, at the node's opset.
struct Attributes {
  int64_t opset = 0;
  bool upsample = false;
  Mode mode = Mode::Nearest;
  Coord coord = Coord::HalfPixel;
  NearestMode nearest = NearestMode::RoundPreferFloor;
  AspectPolicy policy = AspectPolicy::Stretch;
  float cubic_a = -0.75f;
  bool exclude_outside = false;
  float extrapolation = 0.f;
  bool antialias = false;
  std::vector<int64_t> axes;
  std::vector<float> legacy_scales;  // Upsample before opset 9: scales are attributes

  /// True when the node reads its scales from an input, not from attributes (Upsample < 9).
  bool scales_from_input() const { return !upsample || opset >= 9; }
  /// True when the node has the opset-11 inputs (X, roi, scales, sizes).
  bool has_roi_and_sizes() const { return !upsample && opset >= 11; }
};

inline Mode parse_mode(const Node& node, bool upsample) {
  std::string mode = node.attr_string("mode", "nearest");
  if (mode == "nearest") return Mode::Nearest;
  if (mode == "linear" || mode == "bilinear") return Mode::Linear;
  if (mode == "cubic" && !upsample) return Mode::Cubic;
  node.fail("unsupported mode '", mode, "'");
}

inline Coord parse_coord(const Node& node, int64_t opset) {
  std::string ctm = node.attr_string("coordinate_transformation_mode", "half_pixel");
  if (ctm == "half_pixel") return Coord::HalfPixel;
  if (ctm == "half_pixel_symmetric" && opset >= 19) return Coord::HalfPixelSymmetric;
  if (ctm == "pytorch_half_pixel") return Coord::PytorchHalfPixel;
  if (ctm == "align_corners") return Coord::AlignCorners;
  if (ctm == "asymmetric") return Coord::Asymmetric;
  if (ctm == "tf_half_pixel_for_nn" && opset < 13) return Coord::TfHalfPixelForNn;
  if (ctm == "tf_crop_and_resize") return Coord::TfCropAndResize;
  node.fail("unsupported coordinate_transformation_mode '", ctm, "' at opset ", opset);
}

inline NearestMode parse_nearest_mode(const Node& node) {
  std::string nm = node.attr_string("nearest_mode", "round_prefer_floor");
  if (nm == "round_prefer_floor") return NearestMode::RoundPreferFloor;
  if (nm == "round_prefer_ceil") return NearestMode::RoundPreferCeil;
  if (nm == "floor") return NearestMode::Floor;
  if (nm == "ceil") return NearestMode::Ceil;
  node.fail("unsupported nearest_mode '", nm, "'");
}

inline AspectPolicy parse_policy(const Node& node) {
  std::string policy = node.attr_string("keep_aspect_ratio_policy", "stretch");
  if (policy == "stretch") return AspectPolicy::Stretch;
  if (policy == "not_larger") return AspectPolicy::NotLarger;
  if (policy == "not_smaller") return AspectPolicy::NotSmaller;
  node.fail("unsupported keep_aspect_ratio_policy '", policy, "'");
}

/// Parses the attributes of a Resize or Upsample node at `opset`; fails naming the node.
inline Attributes parse_attributes(const Node& node, int64_t opset) {
  Attributes a;
  a.opset = opset;
  a.upsample = node.op_type == "Upsample";
  a.mode = parse_mode(node, a.upsample);
  if (a.upsample || opset < 11) {
    // Before opset 11 the only transformation was asymmetric with the "simple" rounding.
    a.coord = Coord::Asymmetric;
    a.nearest = NearestMode::Simple;
    if (a.upsample && opset < 7) {
      a.legacy_scales = {1.f, 1.f, node.attr_float("height_scale"), node.attr_float("width_scale")};
    } else if (a.upsample && opset < 9) {
      a.legacy_scales = node.attr_floats("scales");
    }
    return a;
  }
  a.coord = parse_coord(node, opset);
  a.nearest = parse_nearest_mode(node);
  a.cubic_a = node.attr_float("cubic_coeff_a", -0.75f);
  a.exclude_outside = node.attr_int("exclude_outside", 0) != 0;
  a.extrapolation = node.attr_float("extrapolation_value", 0.f);
  if (opset >= 18) {
    a.antialias = node.attr_int("antialias", 0) != 0;
    a.axes = node.attr_ints("axes", {});
    a.policy = parse_policy(node);
  }
  return a;
}

/// The axes the scales or sizes are given for, normalized (every axis when `axes` is unset).
inline std::vector<int64_t> resized_axes(const Attributes& a, int64_t rank, const Node& node) {
  std::vector<int64_t> axes;
  for (int64_t ax : a.axes) axes.push_back(normalize_axis(ax, rank));
  if (axes.empty())
    for (int64_t ax = 0; ax < rank; ++ax) axes.push_back(ax);
  for (size_t i = 0; i < axes.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (axes[i] == axes[j]) node.fail("axes contains ", axes[i], " twice");
  return axes;
}

/// Per-dimension output size, scale, unrounded resized length and roi of a resize.
struct Geometry {
  std::vector<int64_t> out;
  std::vector<double> scale;
  // The unrounded resized length: the ONNX reference divides by it (not the rounded output
  // size), which matters for align_corners when the scaled size is fractional.
  std::vector<double> resized;
  std::vector<double> roi_start, roi_end;
};

inline void apply_roi(const Attributes& a, const std::vector<int64_t>& axes,
                      const std::vector<double>& roi, const Node& node, Geometry& g) {
  if (a.coord != Coord::TfCropAndResize) return;
  const size_t na = axes.size();
  if (roi.size() != 2 * na) node.fail("tf_crop_and_resize needs roi with ", 2 * na, " values");
  for (size_t i = 0; i < na; ++i) {
    g.roi_start[static_cast<size_t>(axes[i])] = roi[i];
    g.roi_end[static_cast<size_t>(axes[i])] = roi[i + na];
  }
}

inline void apply_scales(const std::vector<int64_t>& in, const std::vector<int64_t>& axes,
                         const std::vector<double>& scales, const Node& node, Geometry& g) {
  for (size_t i = 0; i < axes.size(); ++i) {
    if (!(scales[i] > 0)) node.fail("scales must be positive, got ", scales[i]);
    size_t d = static_cast<size_t>(axes[i]);
    g.scale[d] = scales[i];
    // With tf_crop_and_resize the scale applies to the cropped extent.
    double extent = static_cast<double>(in[d]) * (g.roi_end[d] - g.roi_start[d]);
    g.resized[d] = extent * scales[i];
    g.out[d] = static_cast<int64_t>(std::floor(g.resized[d]));
  }
}

inline void apply_sizes(const Attributes& a, const std::vector<int64_t>& in,
                        const std::vector<int64_t>& axes, const std::vector<int64_t>& sizes,
                        const Node& node, Geometry& g) {
  const size_t na = axes.size();
  const bool notlarger = a.policy == AspectPolicy::NotLarger;
  double common = notlarger ? 1e300 : 0;
  for (size_t i = 0; i < na && a.policy != AspectPolicy::Stretch; ++i) {
    double r =
        static_cast<double>(sizes[i]) / static_cast<double>(in[static_cast<size_t>(axes[i])]);
    common = notlarger ? std::min(common, r) : std::max(common, r);
  }
  for (size_t i = 0; i < na; ++i) {
    size_t d = static_cast<size_t>(axes[i]);
    if (sizes[i] < 0) node.fail("sizes must be non-negative, got ", sizes[i]);
    if (a.policy == AspectPolicy::Stretch) {
      g.out[d] = sizes[i];
      g.resized[d] = static_cast<double>(sizes[i]);
      g.scale[d] = in[d] ? static_cast<double>(sizes[i]) / static_cast<double>(in[d]) : 1.0;
    } else {
      g.scale[d] = common;
      g.resized[d] = common * static_cast<double>(in[d]);
      g.out[d] = static_cast<int64_t>(std::round(g.resized[d]));
    }
  }
}

/// The geometry of resizing an input of shape `in` along `axes` by `scales` or to `sizes`
/// (exactly one non-empty, one value per axis); `roi` (2 values per axis) is read only by
/// tf_crop_and_resize.
inline Geometry geometry(const Attributes& a, const std::vector<int64_t>& in,
                         const std::vector<int64_t>& axes, const std::vector<double>& scales,
                         const std::vector<int64_t>& sizes, const std::vector<double>& roi,
                         const Node& node) {
  const size_t na = axes.size();
  if (!scales.empty() && scales.size() != na)
    node.fail("scales has ", scales.size(), " values, expected ", na);
  if (!sizes.empty() && sizes.size() != na)
    node.fail("sizes has ", sizes.size(), " values, expected ", na);
  Geometry g;
  g.out = in;
  g.scale.assign(in.size(), 1.0);
  g.resized.assign(in.begin(), in.end());
  g.roi_start.assign(in.size(), 0.0);
  g.roi_end.assign(in.size(), 1.0);
  apply_roi(a, axes, roi, node, g);
  if (!scales.empty())
    apply_scales(in, axes, scales, node, g);
  else
    apply_sizes(a, in, axes, sizes, node, g);
  return g;
}

/// True when an axis is copied as it is (the kernel's shortcut): same length, scale 1, and a
/// transformation that maps every position onto itself then.
inline bool identity_axis(const Attributes& a, int64_t len_in, int64_t len_out, double scale) {
  return len_in == len_out && scale == 1.0 && a.coord != Coord::TfCropAndResize &&
         a.coord != Coord::TfHalfPixelForNn;
}

inline double cubic_weight(double x, double a) {
  x = std::abs(x);
  if (x <= 1) return ((a + 2) * x - (a + 3)) * x * x + 1;
  if (x < 2) return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
  return 0;
}

/// Maps output coordinate `xr` to the input coordinate along one axis of input length
/// `len_in`, output length `len_out` and unrounded resized length `lo`.
inline double original_coord(const Attributes& a, int64_t xr, int64_t len_in, int64_t len_out,
                             double lo, double scale, double start, double end) {
  const double x = static_cast<double>(xr), li = static_cast<double>(len_in);
  switch (a.coord) {
    case Coord::HalfPixel:
      return (x + 0.5) / scale - 0.5;
    case Coord::HalfPixelSymmetric: {
      // The ONNX reference: the rounded output length over the unrounded one, which centres
      // the sampled extent when the scaled length is fractional.
      double adjustment = static_cast<double>(len_out) / lo;
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

inline int64_t nearest_index(NearestMode mode, double x, double scale) {
  switch (mode) {
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

/// The linear or cubic filter's taps around input coordinate `xo` (unclamped indices),
/// normalized when antialiasing or excluding outside taps.
inline std::vector<Tap> filter_taps(const Attributes& a, double xo, int64_t len_in, double scale) {
  const double fl = std::floor(xo), t = xo - fl;
  const int64_t i0 = static_cast<int64_t>(fl);
  const bool aa = a.antialias && scale < 1.0;
  const double s = aa ? scale : 1.0;
  std::vector<Tap> raw;
  if (a.mode == Mode::Linear) {
    // Triangle filter, stretched by 1/scale when antialiasing a downsample.
    const int64_t first = aa ? static_cast<int64_t>(std::floor(-1 / s)) + 1 : 0;
    const int64_t count = aa ? 2 - 2 * first : 2;
    for (int64_t j = first; j < first + count; ++j)
      raw.push_back({i0 + j, std::max(0.0, 1 - std::abs((static_cast<double>(j) - t) * s))});
  } else {
    const int64_t first = aa ? static_cast<int64_t>(std::floor(-2 / s)) + 1 : -1;
    const int64_t count = aa ? 2 - 2 * first : 4;
    for (int64_t j = first; j < first + count; ++j)
      raw.push_back({i0 + j, cubic_weight((static_cast<double>(j) - t) * s, a.cubic_a)});
  }
  double total = 0;
  for (auto& tap : raw) {
    if (a.exclude_outside && (tap.index < 0 || tap.index >= len_in)) tap.weight = 0;
    total += tap.weight;
  }
  if ((aa || a.exclude_outside) && total != 0)
    for (auto& tap : raw) tap.weight /= total;
  return raw;
}

/// The taps of every output position along one axis of input length `len_in`.
inline AxisTaps axis_taps(const Attributes& a, int64_t len_in, int64_t len_out, double resized,
                          double scale, double start, double end) {
  AxisTaps r;
  r.taps.resize(static_cast<size_t>(len_out));
  r.outside.assign(static_cast<size_t>(len_out), false);
  auto clamp = [&](int64_t i) { return std::clamp<int64_t>(i, 0, len_in - 1); };
  for (int64_t o = 0; o < len_out; ++o) {
    auto& taps = r.taps[static_cast<size_t>(o)];
    if (identity_axis(a, len_in, len_out, scale)) {
      taps.push_back({o, 1.0});
      continue;
    }
    const double xo = original_coord(a, o, len_in, len_out, resized, scale, start, end);
    if (a.coord == Coord::TfCropAndResize && (xo < 0 || xo > static_cast<double>(len_in - 1))) {
      r.outside[static_cast<size_t>(o)] = true;
      taps.push_back({0, 0.0});
      continue;
    }
    if (a.mode == Mode::Nearest) {
      taps.push_back({clamp(nearest_index(a.nearest, xo, scale)), 1.0});
      continue;
    }
    for (const Tap& tap : filter_taps(a, xo, len_in, scale))
      if (tap.weight != 0) taps.push_back({clamp(tap.index), tap.weight});
    if (taps.empty()) taps.push_back({clamp(static_cast<int64_t>(std::floor(xo))), 0.0});
  }
  return r;
}

/// The taps of axis `d` of a resize with geometry `g` of an input of shape `in`.
inline AxisTaps axis_taps(const Attributes& a, const Geometry& g, const std::vector<int64_t>& in,
                          size_t d) {
  return axis_taps(a, in[d], g.out[d], g.resized[d], g.scale[d], g.roi_start[d], g.roi_end[d]);
}

}  // namespace dprun::resize
