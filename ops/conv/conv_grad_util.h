#pragma once
// Shared pieces of the Conv and ConvTranspose gradient rules: the window attributes, crops of
// the spatial axes, and the weight gradient of a (grouped) convolution in ordinary ONNX ops.
//
// The weight gradient of a convolution of X [N, G*Ci, in...] into dY [N, G*Co, out...] is
//   dW[g*Co + o, c, k] = sum over n and p of dY[n, g*Co + o, p] * X[n, g*Ci + c, p*s + k*d - pad]
// (s strides, d dilations), a Conv of X with the batch and channel axes swapped (A, batch c,
// channel g*N + n) and dY swapped the same way (B [G*Co, N, out...], N input channels per
// group): Conv(A, B, group G, strides d, dilations s, the forward pads) is dW^T [Ci, G*Co, ...]
// over at least the kernel's rows, cropped to the kernel and swapped back. For group 1 A is
// Transpose(X); otherwise X is regrouped without knowing N at build time:
//   Unsqueeze(X, 2) [N, G*Ci, 1, in...] -> Reshape [0, G, Ci, 0...] -> [N, G, Ci, in...]
//   -> Transpose [2, 1, 0, 3...] -> [Ci, G, N, in...] -> Reshape [0, -1, 1, 0...]
//   -> [Ci, G*N, 1, in...] -> Squeeze(2) -> [Ci, G*N, in...]
// (Reshape's 0 copies the input's dim at the same position, so every target is a constant; Ci
// is -1 when not known at build time). engine/rewrites/conv_weight_grad_fusion.h finds both
// forms and runs them as one backward-weights convolution.
#include <climits>
#include <optional>
#include <string>
#include <vector>

#include "ops/grad/grad_util.h"

namespace dprun::grad {

/// A convolution's window attributes with their defaults, for `spatial` axes.
struct ConvWindow {
  size_t spatial = 0;
  std::vector<int64_t> strides, dilations, pads;  // pads: every begin, then every end
  int64_t group = 1;
};

/// The node's strides, dilations, pads (zeros for auto_pad VALID) and group; fails for an
/// auto_pad other than NOTSET and VALID or lists that do not match `spatial`.
inline ConvWindow conv_window(GradientContext& ctx, size_t spatial) {
  const Node& node = ctx.node();
  const std::string auto_pad = node.attr_string("auto_pad", "NOTSET");
  if (auto_pad != "NOTSET" && auto_pad != "VALID" && !auto_pad.empty())
    ctx.fail("auto_pad ", auto_pad, " is not supported (only NOTSET and VALID)");
  ConvWindow w;
  w.spatial = spatial;
  w.strides = node.attr_ints("strides", std::vector<int64_t>(spatial, 1));
  w.dilations = node.attr_ints("dilations", std::vector<int64_t>(spatial, 1));
  w.pads = node.attr_ints("pads", std::vector<int64_t>(2 * spatial, 0));
  if (auto_pad == "VALID") w.pads.assign(2 * spatial, 0);
  w.group = node.attr_int("group", 1);
  if (w.strides.size() != spatial || w.dilations.size() != spatial || w.pads.size() != 2 * spatial)
    ctx.fail("strides, dilations and pads must match the ", spatial, " spatial axes");
  if (w.group < 1) ctx.fail("group must be positive, got ", w.group);
  return w;
}

/// Shape(v)[2:], the run-time spatial sizes of an [N, C, D1, ...] value (opset 10 Slice).
inline std::string spatial_dims(GradientContext& ctx, const std::string& v) {
  return ctx.emit("Slice",
                  {ctx.emit("Shape", {v}), ctx.ints({2}), ctx.ints({INT64_MAX}), ctx.ints({0})});
}

/// The kernel's spatial sizes when known at build time: W's (input 1) dims 2.., or kernel_shape.
inline std::optional<std::vector<int64_t>> static_kernel(GradientContext& ctx) {
  if (auto k = static_dims(ctx, ctx.I(1), 2)) return k;
  if (ctx.node().has_attr("kernel_shape")) return ctx.node().attr_ints("kernel_shape");
  return std::nullopt;
}

/// Axis `axis` of `v` when its declared shape (or constant value) gives it.
inline std::optional<int64_t> static_dim(GradientContext& ctx, const std::string& v, size_t axis) {
  if (auto c = ctx.constant_value(v)) {
    if (axis < c->shape().size()) return c->shape()[axis];
    return std::nullopt;
  }
  auto t = ctx.type_of(v);
  if (!t || !t->shape || axis >= t->shape->size() || !(*t->shape)[axis].is_known())
    return std::nullopt;
  return (*t->shape)[axis].value;
}

/// Slice of `v` on the spatial axes 2.. from 0 to `ends` (a static list or a 1-D int64 value).
inline std::string crop_spatial(GradientContext& ctx, const std::string& v, size_t spatial,
                                const std::vector<int64_t>* static_ends, const std::string& ends) {
  std::vector<int64_t> axes, starts(spatial, 0);
  for (size_t i = 0; i < spatial; ++i) axes.push_back(static_cast<int64_t>(i + 2));
  if (ctx.onnx_opset() >= 10)
    return ctx.emit("Slice", {v, ctx.ints(starts), static_ends ? ctx.ints(*static_ends) : ends,
                              ctx.ints(axes)});
  if (!static_ends) ctx.fail("a run-time crop needs ai.onnx opset >= 10");
  return ctx.emit("Slice", {v},
                  {{"starts", Attribute::of_ints(starts)},
                   {"ends", Attribute::of_ints(*static_ends)},
                   {"axes", Attribute::of_ints(axes)}});
}

/// `v` cropped to the spatial sizes of `like`: static ones when given, else read at run time.
inline std::string crop_like(GradientContext& ctx, const std::string& v, size_t spatial,
                             const std::optional<std::vector<int64_t>>& sizes,
                             const std::string& like) {
  return sizes ? crop_spatial(ctx, v, spatial, &*sizes, {})
               : crop_spatial(ctx, v, spatial, nullptr, spatial_dims(ctx, like));
}

/// Transpose of `v` by `perm`.
inline std::string transpose(GradientContext& ctx, const std::string& v,
                             std::vector<int64_t> perm) {
  return ctx.emit("Transpose", {v}, {{"perm", Attribute::of_ints(std::move(perm))}});
}

/// {first..., 2, 3, ..., last}: a permutation that keeps the axes after the leading ones.
inline std::vector<int64_t> leading_perm(std::vector<int64_t> first, size_t rank) {
  for (size_t i = first.size(); i < rank; ++i) first.push_back(static_cast<int64_t>(i));
  return first;
}

/// X [N, G*Ci, in...] as [Ci, G*N, in...] with channel g*N + n (see the file comment); `ci` is
/// Ci when known at build time.
inline std::string regroup_batch_into_channels(GradientContext& ctx, const std::string& x,
                                               const ConvWindow& w, std::optional<int64_t> ci) {
  if (ctx.onnx_opset() < 5)
    ctx.fail("the weight gradient of group ", w.group, " needs ai.onnx opset >= 5 (Reshape)");
  const std::vector<int64_t> copy(w.spatial, 0);
  std::vector<int64_t> split = {0, w.group, ci.value_or(-1)}, merge = {0, -1, 1};
  split.insert(split.end(), copy.begin(), copy.end());
  merge.insert(merge.end(), copy.begin(), copy.end());
  std::string v = ctx.unsqueeze(x, {2});
  v = ctx.emit("Reshape", {v, ctx.ints(split)});
  v = transpose(ctx, v, leading_perm({2, 1, 0}, w.spatial + 3));
  v = ctx.emit("Reshape", {v, ctx.ints(merge)});
  return ctx.squeeze(v, {2});
}

/// dW [G*Co, Ci, kernel...] of a convolution of `x` into `dy` with window `w` (see the file
/// comment). The kernel's sizes are `kernel` or, at run time, Shape(`w_value`)[2:]; `ci` is Ci
/// when known at build time.
inline std::string conv_weight_gradient(GradientContext& ctx, const std::string& x,
                                        const std::string& dy, const ConvWindow& w,
                                        const std::optional<std::vector<int64_t>>& kernel,
                                        const std::string& w_value, std::optional<int64_t> ci) {
  const std::vector<int64_t> swap = leading_perm({1, 0}, w.spatial + 2);
  const std::string a =
      w.group == 1 ? transpose(ctx, x, swap) : regroup_batch_into_channels(ctx, x, w, ci);
  std::map<std::string, Attribute> attrs = {{"strides", Attribute::of_ints(w.dilations)},
                                            {"dilations", Attribute::of_ints(w.strides)},
                                            {"pads", Attribute::of_ints(w.pads)}};
  if (w.group != 1) attrs["group"] = Attribute::of_int(w.group);
  std::string dw = ctx.emit("Conv", {a, transpose(ctx, dy, swap)}, attrs);
  // The correlation can extend past the kernel when the stride leaves input rows unused.
  dw = crop_like(ctx, dw, w.spatial, kernel, w_value);
  return transpose(ctx, dw, swap);
}

/// dB = dY summed over every axis but 1, as the gradient of the optional input 2 (B) when wanted.
inline void set_bias_gradient(GradientContext& ctx, size_t spatial) {
  if (ctx.input_count() <= 2 || !ctx.wants_GI(2)) return;
  std::vector<int64_t> axes = {0};
  for (size_t i = 0; i < spatial; ++i) axes.push_back(static_cast<int64_t>(i + 2));
  ctx.set_GI(2, ctx.reduce_sum(ctx.GO(0), axes, false));
}

}  // namespace dprun::grad
