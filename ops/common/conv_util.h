#pragma once
// Window geometry shared by Conv, ConvTranspose and the pooling ops: attribute parsing
// (kernel_shape, strides, dilations, pads, auto_pad, ceil_mode), output-size arithmetic, and the
// validated input/output shapes of Conv, ConvTranspose and pooling, shared by every device.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/graph.h"
#include "engine/kernel.h"
#include "engine/shape.h"

namespace dprun {

enum class AutoPad { NotSet, SameUpper, SameLower, Valid };

inline AutoPad parse_auto_pad(const Node& node) {
  std::string s = node.attr_string("auto_pad", "NOTSET");
  if (s == "NOTSET" || s.empty()) return AutoPad::NotSet;
  if (s == "SAME_UPPER") return AutoPad::SameUpper;
  if (s == "SAME_LOWER") return AutoPad::SameLower;
  if (s == "VALID") return AutoPad::Valid;
  node.fail("unknown auto_pad '", s, "'");
}

/// Resolved per-spatial-dimension geometry of a sliding window.
struct WindowGeometry {
  std::vector<int64_t> kernel, strides, dilations, pads_begin, pads_end, in, out;
  size_t rank() const { return kernel.size(); }
};

/// The window attributes as written on the node; empty vectors mean "default".
struct WindowAttrs {
  std::vector<int64_t> kernel_shape, strides, dilations, pads;
  AutoPad auto_pad = AutoPad::NotSet;
  bool ceil_mode = false;

  void parse(const Node& node) {
    kernel_shape = node.attr_ints("kernel_shape", {});
    strides = node.attr_ints("strides", {});
    dilations = node.attr_ints("dilations", {});
    pads = node.attr_ints("pads", {});
    auto_pad = parse_auto_pad(node);
    ceil_mode = node.attr_int("ceil_mode", 0) != 0;
    for (int64_t v : kernel_shape)
      if (v <= 0) node.fail("kernel_shape must be positive, got ", shape_to_string(kernel_shape));
    for (int64_t v : strides)
      if (v <= 0) node.fail("strides must be positive, got ", shape_to_string(strides));
    for (int64_t v : dilations)
      if (v <= 0) node.fail("dilations must be positive, got ", shape_to_string(dilations));
    for (int64_t v : pads)
      if (v < 0) node.fail("pads must be non-negative, got ", shape_to_string(pads));
  }

  /// Fills strides/dilations/pads defaults for `nd` spatial dims and checks their lengths.
  void fill(const Node& node, size_t nd, std::vector<int64_t>& s, std::vector<int64_t>& d,
            std::vector<int64_t>& pb, std::vector<int64_t>& pe) const {
    auto check = [&](const std::vector<int64_t>& v, size_t n, const char* what) {
      if (!v.empty() && v.size() != n)
        node.fail(what, " has ", v.size(), " values, expected ", n, " for ", nd,
                  " spatial dimensions");
    };
    check(strides, nd, "strides");
    check(dilations, nd, "dilations");
    check(pads, 2 * nd, "pads");
    s.assign(nd, 1);
    d.assign(nd, 1);
    if (!strides.empty()) std::copy(strides.begin(), strides.end(), s.begin());
    if (!dilations.empty()) std::copy(dilations.begin(), dilations.end(), d.begin());
    pb.assign(nd, 0);
    pe.assign(nd, 0);
    if (!pads.empty())
      for (size_t i = 0; i < nd; ++i) {
        pb[i] = pads[i];
        pe[i] = pads[i + nd];
      }
  }

  /// Geometry of a forward window op (Conv, pooling) over input spatial dims `in` with the
  /// given kernel sizes (from kernel_shape or the weights).
  WindowGeometry resolve(const Node& node, const std::vector<int64_t>& in,
                         const std::vector<int64_t>& kernel) const {
    const size_t nd = in.size();
    WindowGeometry g;
    g.in = in;
    g.kernel = kernel;
    if (kernel.size() != nd)
      node.fail("kernel has ", kernel.size(), " dims but the input has ", nd, " spatial dims");
    fill(node, nd, g.strides, g.dilations, g.pads_begin, g.pads_end);
    g.out.assign(nd, 0);
    for (size_t i = 0; i < nd; ++i) {
      const int64_t ext = (kernel[i] - 1) * g.dilations[i] + 1;
      const int64_t s = g.strides[i];
      switch (auto_pad) {
        case AutoPad::SameUpper:
        case AutoPad::SameLower: {
          g.out[i] = (in[i] + s - 1) / s;
          int64_t total = std::max<int64_t>(0, (g.out[i] - 1) * s + ext - in[i]);
          int64_t small = total / 2, big = total - small;
          g.pads_begin[i] = auto_pad == AutoPad::SameUpper ? small : big;
          g.pads_end[i] = auto_pad == AutoPad::SameUpper ? big : small;
          break;
        }
        case AutoPad::Valid:
          g.pads_begin[i] = g.pads_end[i] = 0;
          g.out[i] = in[i] >= ext ? (in[i] - ext) / s + 1 : 0;
          break;
        case AutoPad::NotSet: {
          int64_t span = in[i] + g.pads_begin[i] + g.pads_end[i] - ext;
          if (span < 0)
            node.fail("window of extent ", ext, " does not fit padded input dim ",
                      in[i] + g.pads_begin[i] + g.pads_end[i]);
          g.out[i] = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
          // A window that would start entirely in the end padding is dropped (ceil mode).
          if (ceil_mode && (g.out[i] - 1) * s >= in[i] + g.pads_begin[i]) --g.out[i];
          break;
        }
      }
    }
    return g;
  }

  /// Geometry of a transposed convolution: `in` are the input spatial dims, `out` the result.
  /// `output_shape` (spatial sizes, or the full shape) overrides pads; `output_padding` adds
  /// rows at the end.
  WindowGeometry resolve_transpose(const Node& node, const std::vector<int64_t>& in,
                                   const std::vector<int64_t>& kernel,
                                   const std::vector<int64_t>& output_padding,
                                   std::vector<int64_t> output_shape) const {
    const size_t nd = in.size();
    WindowGeometry g;
    g.in = in;
    g.kernel = kernel;
    if (kernel.size() != nd)
      node.fail("kernel has ", kernel.size(), " dims but the input has ", nd, " spatial dims");
    fill(node, nd, g.strides, g.dilations, g.pads_begin, g.pads_end);
    if (!output_padding.empty() && output_padding.size() != nd)
      node.fail("output_padding must have ", nd, " values");
    std::vector<int64_t> adj(nd, 0);
    if (!output_padding.empty())
      std::copy(output_padding.begin(), output_padding.end(), adj.begin());
    if (output_shape.size() == nd + 2)
      output_shape.erase(output_shape.begin(), output_shape.begin() + 2);
    if (!output_shape.empty() && output_shape.size() != nd)
      node.fail("output_shape must have ", nd, " values, got ", shape_to_string(output_shape));
    g.out.assign(nd, 0);
    for (size_t i = 0; i < nd; ++i) {
      const int64_t ext = (kernel[i] - 1) * g.dilations[i] + 1;
      const int64_t full = g.strides[i] * (in[i] - 1) + adj[i] + ext;
      if (adj[i] < 0 || (adj[i] >= g.strides[i] && adj[i] >= g.dilations[i]))
        node.fail("output_padding ", adj[i], " must be smaller than the stride or dilation");
      if (!output_shape.empty() || auto_pad == AutoPad::SameUpper ||
          auto_pad == AutoPad::SameLower) {
        g.out[i] = !output_shape.empty() ? output_shape[i] : in[i] * g.strides[i];
        // A larger requested output is zero-extended at the end rather than padded negatively.
        int64_t total = std::max<int64_t>(0, full - g.out[i]);
        int64_t small = total / 2, big = total - small;
        g.pads_begin[i] = auto_pad == AutoPad::SameUpper ? small : big;
        g.pads_end[i] = auto_pad == AutoPad::SameUpper ? big : small;
      } else {
        if (auto_pad == AutoPad::Valid) g.pads_begin[i] = g.pads_end[i] = 0;
        g.out[i] = full - g.pads_begin[i] - g.pads_end[i];
      }
      if (g.out[i] < 0) node.fail("negative output size for spatial dim ", i);
    }
    return g;
  }
};

/// Fails naming X, W and group, which do not agree.
[[noreturn]] inline void fail_group_mismatch(const KernelContext& ctx, const Tensor& x,
                                             const Tensor& w, int64_t group) {
  ctx.fail("X ", shape_to_string(x.shape()), " and W ", shape_to_string(w.shape()),
           " do not agree for group=", group);
}

/// W's window sizes (its dims after the first two), checked against kernel_shape when given.
inline std::vector<int64_t> weight_kernel(const KernelContext& ctx, const WindowAttrs& attrs,
                                          const Tensor& w) {
  std::vector<int64_t> kernel(w.shape().begin() + 2, w.shape().end());
  if (!attrs.kernel_shape.empty() && attrs.kernel_shape != kernel)
    ctx.fail("kernel_shape ", shape_to_string(attrs.kernel_shape), " does not match W ",
             shape_to_string(w.shape()));
  return kernel;
}

/// Validated shapes of one Conv invocation.
struct ConvShapes {
  int64_t n = 0, c = 0, m = 0, group = 1;
  WindowGeometry g;
  Shape out_shape;
};

inline ConvShapes conv_shapes(const KernelContext& ctx, const WindowAttrs& attrs, int64_t group,
                              const Tensor& x, const Tensor& w) {
  if (x.rank() < 3)
    ctx.fail("X must have rank >= 3 (N, C, spatial...), got ", shape_to_string(x.shape()));
  if (w.rank() != x.rank())
    ctx.fail("W ", shape_to_string(w.shape()), " must have the rank of X ",
             shape_to_string(x.shape()));
  ConvShapes s;
  s.n = x.dim(0);
  s.c = x.dim(1);
  s.m = w.dim(0);
  s.group = group;
  if (group <= 0 || s.c != w.dim(1) * group || s.m % group != 0)
    fail_group_mismatch(ctx, x, w, group);
  const std::vector<int64_t> in(x.shape().begin() + 2, x.shape().end());
  const std::vector<int64_t> kernel = weight_kernel(ctx, attrs, w);
  s.g = attrs.resolve(ctx.node(), in, kernel);
  s.out_shape = {s.n, s.m};
  for (int64_t o : s.g.out) s.out_shape.push_back(o);
  return s;
}

/// Validated shapes of one ConvTranspose invocation: X [N, C, in...], W [C, M / group, k...],
/// optional B [M].
struct ConvTransposeShapes {
  int64_t n = 0, c = 0, m = 0;
  WindowGeometry g;
  Shape out_shape;
};

inline ConvTransposeShapes conv_transpose_shapes(const KernelContext& ctx, const WindowAttrs& attrs,
                                                 int64_t group,
                                                 const std::vector<int64_t>& output_padding,
                                                 const std::vector<int64_t>& output_shape,
                                                 const Tensor& x, const Tensor& w,
                                                 const Tensor* b) {
  if (x.rank() < 3) ctx.fail("X must have rank >= 3, got ", shape_to_string(x.shape()));
  if (w.rank() != x.rank() || w.dtype() != x.dtype())
    ctx.fail("W ", w.describe(), " must match the rank and dtype of X ", x.describe());
  ConvTransposeShapes s;
  s.n = x.dim(0);
  s.c = x.dim(1);
  s.m = w.dim(1) * group;
  const int64_t c = s.c, m = s.m;
  if (group <= 0 || w.dim(0) != c || c % group != 0) fail_group_mismatch(ctx, x, w, group);
  const std::vector<int64_t> in(x.shape().begin() + 2, x.shape().end());
  const std::vector<int64_t> kernel = weight_kernel(ctx, attrs, w);
  s.g = attrs.resolve_transpose(ctx.node(), in, kernel, output_padding, output_shape);
  if (b && (b->dtype() != x.dtype() || b->shape() != Shape{m}))
    ctx.fail("B must be ", dtype_name(x.dtype()), "[", m, "], got ", b->describe());
  s.out_shape = {s.n, s.m};
  for (int64_t o : s.g.out) s.out_shape.push_back(o);
  return s;
}

/// Shared attribute handling: resolves the geometry of a pooling node for input `x`.
struct PoolBase {
  WindowAttrs attrs;
  explicit PoolBase(const Node& node) {
    attrs.parse(node);
    if (attrs.kernel_shape.empty()) node.fail("kernel_shape is required");
  }
  WindowGeometry geometry(const KernelContext& ctx, const Tensor& x, Shape& out_shape) const {
    if (x.rank() < 3)
      ctx.fail("X must have rank >= 3 (N, C, spatial...), got ", shape_to_string(x.shape()));
    std::vector<int64_t> in(x.shape().begin() + 2, x.shape().end());
    WindowGeometry g = attrs.resolve(ctx.node(), in, attrs.kernel_shape);
    out_shape = {x.dim(0), x.dim(1)};
    for (int64_t o : g.out) out_shape.push_back(o);
    return g;
  }
};

/// Reads an Int or Float attribute as a double (LpPool's `p` was a float before opset 2).
inline double attr_number(const Node& node, const std::string& key, double fallback) {
  const Attribute* a = node.find_attr(key);
  if (!a) return fallback;
  if (a->kind == Attribute::Kind::Float) return a->f;
  if (a->kind == Attribute::Kind::Int) return static_cast<double>(a->i);
  node.fail("attribute '", key, "' must be a number");
}

}  // namespace dprun
