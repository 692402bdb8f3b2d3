#pragma once
// Window geometry shared by Conv, ConvTranspose and the pooling ops: attribute parsing
// (kernel_shape, strides, dilations, pads, auto_pad, ceil_mode) and output-size arithmetic.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/graph.h"
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

/// Reads an Int or Float attribute as a double (LpPool's `p` was a float before opset 2).
inline double attr_number(const Node& node, const std::string& key, double fallback) {
  const Attribute* a = node.find_attr(key);
  if (!a) return fallback;
  if (a->kind == Attribute::Kind::Float) return a->f;
  if (a->kind == Attribute::Kind::Int) return static_cast<double>(a->i);
  node.fail("attribute '", key, "' must be a number");
}

}  // namespace dprun
