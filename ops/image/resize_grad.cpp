// Resize (opsets 10 on) and Upsample (opsets 1 to 9): Y is linear in X and separable per axis,
// Y = A_1 ... A_k X with A_d the [out_d, in_d] interpolation matrix of axis d (row o holds the
// weights of the input positions output o reads, 0/1 for nearest). So dX = A_1^T ... A_k^T dY:
// per resized axis, one MatMul by a constant matrix, with the axis moved last (or, for the
// axis before last, A_d^T multiplied from the left) and back. Axes the node copies as they are
// need nothing.
//
// The matrices come from the taps of ops/image/resize_coordinates.h, the arithmetic the kernel
// itself sums, so they match the forward pass exactly in every mode (nearest with each
// rounding, linear, cubic, exclude_outside, antialias, tf_crop_and_resize's extrapolated
// positions, which get no gradient). They need the input and output lengths of the resized
// axes at build time: constant scales or sizes (non-constant sizes are read from Y's declared
// shape), constant roi for tf_crop_and_resize, and X's declared dims on those axes. An axis of
// unknown length (a dynamic batch) is allowed where the node leaves it alone. The roi, scales
// and sizes inputs get no gradient.
#include "ops/grad/grad_util.h"
#include "ops/image/resize_coordinates.h"

namespace dprun {
namespace {

constexpr int64_t kUnknown = -1;
// A size read from Y's declared shape where Y's dim is X's own symbol: the axis is copied.
constexpr int64_t kCopied = -2;

// What the node resizes by: scales or sizes for `axes`, and the roi.
struct Request {
  std::vector<double> scales;
  std::vector<int64_t> sizes;
  std::vector<double> roi;
};

std::vector<double> constant_floats(GradientContext& ctx, size_t input, const char* what) {
  auto c = ctx.constant_value(ctx.I(input));
  if (!c)
    ctx.fail(what, " ('", ctx.I(input),
             "') is not a constant: the gradient needs the resized sizes at build time");
  std::vector<double> v;
  for (int64_t i = 0; i < c->numel(); ++i) v.push_back(c->item_as_double(i));
  return v;
}

// The declared shape of `v` when it has rank `rank`; every dim unknown otherwise.
SymbolicShape declared_shape(GradientContext& ctx, const std::string& v, int64_t rank) {
  if (auto c = ctx.constant_value(v)) {
    SymbolicShape s;
    for (int64_t d : c->shape()) s.push_back(Dim::known(d));
    return s;
  }
  auto t = ctx.type_of(v);
  if (t && t->shape && static_cast<int64_t>(t->shape->size()) == rank) return *t->shape;
  return SymbolicShape(static_cast<size_t>(rank));
}

// Sizes given by a non-constant input: Y's declared dims on `axes` (the output is exactly the
// sizes under the stretch policy), kCopied where Y's dim is X's symbol (a dynamic batch).
std::vector<int64_t> sizes_from_output(GradientContext& ctx, const resize::Attributes& a,
                                       const std::vector<int64_t>& axes) {
  if (a.policy != resize::AspectPolicy::Stretch)
    ctx.fail("sizes ('", ctx.I(3), "') is not a constant, which keep_aspect_ratio_policy needs");
  const int64_t rank = ctx.require_rank(ctx.I(0));
  const SymbolicShape x = declared_shape(ctx, ctx.I(0), rank);
  const SymbolicShape y = declared_shape(ctx, ctx.O(0), rank);
  std::vector<int64_t> sizes;
  for (int64_t d : axes) {
    const Dim& xd = x[static_cast<size_t>(d)];
    const Dim& yd = y[static_cast<size_t>(d)];
    if (yd.is_known())
      sizes.push_back(yd.value);
    else if (!xd.symbol.empty() && xd.symbol == yd.symbol)
      sizes.push_back(kCopied);
    else
      ctx.fail("sizes ('", ctx.I(3), "') is not a constant and Y's axis ", d,
               " has no declared size: the gradient needs the resized sizes at build time");
  }
  return sizes;
}

Request read_request(GradientContext& ctx, const resize::Attributes& a,
                     const std::vector<int64_t>& axes) {
  Request r;
  if (!a.scales_from_input()) {
    r.scales.assign(a.legacy_scales.begin(), a.legacy_scales.end());
    return r;
  }
  if (!a.has_roi_and_sizes()) {
    r.scales = constant_floats(ctx, 1, "scales");
    return r;
  }
  auto given = [&](size_t i) { return ctx.input_count() > i && !ctx.I(i).empty(); };
  if (a.coord == resize::Coord::TfCropAndResize && given(1)) r.roi = constant_floats(ctx, 1, "roi");
  // An exporter may pass an empty constant for the input it does not use.
  auto c = given(2) ? ctx.constant_value(ctx.I(2)) : std::nullopt;
  if (given(2) && (!c || c->numel() > 0)) r.scales = constant_floats(ctx, 2, "scales");
  if (given(3)) {
    auto s = ctx.constant_value(ctx.I(3));
    if (!s) r.sizes = sizes_from_output(ctx, a, axes);
    for (int64_t i = 0; s && i < s->numel(); ++i)
      r.sizes.push_back(static_cast<int64_t>(s->item_as_double(i)));
  }
  if (r.scales.empty() == r.sizes.empty())
    ctx.fail("exactly one of scales and sizes must be given");
  return r;
}

// X's dims, with 1 standing for an unknown dim that the node copies as it is (an axis outside
// `axes`, one scaled by 1, or one Y shares X's symbol on; such sizes become 1 too); fails
// naming any other unknown dim.
std::vector<int64_t> input_dims(GradientContext& ctx, const resize::Attributes& a,
                                const std::vector<int64_t>& axes, Request& r) {
  const int64_t rank = ctx.require_rank(ctx.I(0));
  const SymbolicShape x = declared_shape(ctx, ctx.I(0), rank);
  const bool tf =
      a.coord == resize::Coord::TfCropAndResize || a.coord == resize::Coord::TfHalfPixelForNn;
  std::vector<int64_t> in;
  for (int64_t d = 0; d < rank; ++d) {
    const Dim& xd = x[static_cast<size_t>(d)];
    const size_t i = static_cast<size_t>(std::find(axes.begin(), axes.end(), d) - axes.begin());
    const bool copied = i == axes.size() || (!r.scales.empty() && r.scales[i] == 1.0) ||
                        (!r.sizes.empty() && r.sizes[i] == kCopied);
    if (!r.sizes.empty() && i < axes.size() && r.sizes[i] == kCopied) r.sizes[i] = 1;
    if (xd.is_known()) {
      in.push_back(xd.value);
      continue;
    }
    if (tf || !copied)
      ctx.fail("the size of X's axis ", d,
               " is not known at build time: the gradient builds that axis's interpolation "
               "matrix from it (declare X's shape)");
    in.push_back(1);
  }
  return in;
}

// True when the taps copy every position onto itself (as tf_crop_and_resize may on an axis
// it does not crop): the axis needs no MatMul.
bool copies(const resize::AxisTaps& taps, int64_t len_in) {
  if (static_cast<int64_t>(taps.taps.size()) != len_in) return false;
  for (size_t o = 0; o < taps.taps.size(); ++o) {
    const auto& t = taps.taps[o];
    if (taps.outside[o] || t.size() != 1 || t[0].index != static_cast<int64_t>(o) ||
        t[0].weight != 1.0)
      return false;
  }
  return true;
}

// A [rows, cols] constant of `dtype` with the values of `m` (row-major).
std::string matrix_constant(GradientContext& ctx, const std::vector<double>& m, int64_t rows,
                            int64_t cols, DType dtype) {
  if (dtype == DType::Float32) {
    std::vector<float> f(m.begin(), m.end());
    return ctx.constant(Tensor::from_vector<float>({rows, cols}, f));
  }
  std::string c = ctx.constant(Tensor::from_vector<double>({rows, cols}, m));
  return dtype == DType::Float64 ? c : ctx.cast(c, dtype);
}

// The interpolation matrix A [out, in] of one axis (A^T [in, out] when `transposed`).
std::vector<double> interpolation_matrix(const resize::AxisTaps& taps, int64_t len_in,
                                         bool transposed) {
  const int64_t len_out = static_cast<int64_t>(taps.taps.size());
  std::vector<double> m(static_cast<size_t>(len_out * len_in), 0.0);
  for (int64_t o = 0; o < len_out; ++o)
    for (const resize::Tap& t : taps.taps[static_cast<size_t>(o)])
      // Clamped taps may read one input position twice: their weights add up.
      m[static_cast<size_t>(transposed ? t.index * len_out + o : o * len_in + t.index)] += t.weight;
  return m;
}

// dX along axis d: contracts g's axis d (length out) with A [out, in].
std::string apply_transpose(GradientContext& ctx, const std::string& g, int64_t d, int64_t rank,
                            const resize::AxisTaps& taps, int64_t len_in, DType dtype) {
  const int64_t len_out = static_cast<int64_t>(taps.taps.size());
  if (d == rank - 2)  // [in, out] x [..., out, W]: no transposes for the axis before last
    return ctx.emit("MatMul", {matrix_constant(ctx, interpolation_matrix(taps, len_in, true),
                                               len_in, len_out, dtype),
                               g});
  std::string m =
      matrix_constant(ctx, interpolation_matrix(taps, len_in, false), len_out, len_in, dtype);
  if (d == rank - 1) return ctx.emit("MatMul", {g, m});
  std::vector<int64_t> perm;
  for (int64_t i = 0; i < rank; ++i) perm.push_back(i == d ? rank - 1 : i == rank - 1 ? d : i);
  std::map<std::string, Attribute> attrs = {{"perm", Attribute::of_ints(perm)}};
  std::string last = ctx.emit("Transpose", {g}, attrs);
  return ctx.emit("Transpose", {ctx.emit("MatMul", {last, m})}, attrs);
}

void resize_grad(GradientContext& ctx) {
  if (!ctx.wants_GI(0)) return;
  const resize::Attributes a = resize::parse_attributes(ctx.node(), ctx.opset());
  const int64_t rank = ctx.require_rank(ctx.I(0));
  if (rank == 0) ctx.fail("X must have rank >= 1");
  const std::vector<int64_t> axes = resize::resized_axes(a, rank, ctx.node());
  Request r = read_request(ctx, a, axes);
  const std::vector<int64_t> in = input_dims(ctx, a, axes, r);
  const resize::Geometry g = resize::geometry(a, in, axes, r.scales, r.sizes, r.roi, ctx.node());
  const DType dtype = ctx.dtype_of(ctx.I(0));
  std::string dx = ctx.GO(0);
  // The per-axis matrices commute (each acts on its own axis): any order gives dX.
  for (int64_t d = rank - 1; d >= 0; --d) {
    const size_t i = static_cast<size_t>(d);
    if (resize::identity_axis(a, in[i], g.out[i], g.scale[i])) continue;
    if (in[i] == 0) ctx.fail("X's axis ", d, " is empty");
    const resize::AxisTaps taps = resize::axis_taps(a, g, in, i);
    if (!copies(taps, in[i])) dx = apply_transpose(ctx, dx, d, rank, taps, in[i], dtype);
  }
  ctx.set_GI(0, dx == ctx.GO(0) ? ctx.emit("Identity", {dx}) : dx);
}

DPRUN_REGISTER_GRADIENT({.op_type = "Resize", .since = 10, .rule = resize_grad});
DPRUN_REGISTER_GRADIENT({.op_type = "Upsample", .since = 1, .until = 9, .rule = resize_grad});

}  // namespace
}  // namespace dprun
