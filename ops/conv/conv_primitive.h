#pragma once
// The oneDNN forward convolution shared by the NCHW (conv_onednn.cpp) and NHWC
// (conv_nhwc.cpp) Conv kernels: they differ only in the activation layouts they ask for.
#include <algorithm>
#include <string>
#include <vector>

#include "ops/common/conv_util.h"
#include "ops/cpu/onednn_util.h"

namespace dprun::onednn {

/// A logical NCHW float32 descriptor over physical NHWC memory.
inline dnnl::memory::desc nhwc_desc(int64_t n, int64_t c, int64_t h, int64_t w) {
  return dnnl::memory::desc({n, c, h, w}, dnnl::memory::data_type::f32,
                            dnnl::memory::format_tag::nhwc);
}

/// A convolution's multiply-adds, near enough for run_sized: `images` x `pixels` input pixels
/// each, over the product of `strides` (empty: 1), times the product of W's dims [M, C / group,
/// k...].
inline double conv_multiply_adds(int64_t images, int64_t pixels, const Shape& weights,
                                 const std::vector<int64_t>& strides) {
  double multiply_adds = static_cast<double>(images) * static_cast<double>(pixels);
  for (int64_t s : strides) multiply_adds /= static_cast<double>(std::max<int64_t>(s, 1));
  for (int64_t d : weights) multiply_adds *= static_cast<double>(d);
  return multiply_adds;
}

/// conv_multiply_adds of an NHWC X [N, H, W, C] and W.
inline double nhwc_conv_multiply_adds(const Tensor& x, const Tensor& w,
                                      const std::vector<int64_t>& strides) {
  return conv_multiply_adds(x.dim(0), x.dim(1) * x.dim(2), w.shape(), strides);
}

/// Whether the plan lets ConvNHWC use Winograd (--allow-winograd) and `conv`, whose weights are
/// the kernel's input `weights` (KernelInfo::input_types), is the kind it may run that way: 3x3
/// (by kernel_shape or W's declared shape), stride 1, undilated, one group. ConvNHWC decides by
/// size from each run's shapes; the fused kernels that contain such a convolution run its own
/// kernel instead of theirs, so that the option keeps its effect.
inline bool may_run_winograd(const KernelInfo& info, const Node& conv, size_t weights) {
  if (!info.plan_options.allow_winograd || conv.attr_int("group", 1) != 1) return false;
  for (const char* key : {"strides", "dilations"})
    for (int64_t v : conv.attr_ints(key, {}))
      if (v != 1) return false;
  std::vector<int64_t> kernel = conv.attr_ints("kernel_shape", {});
  if (weights < info.input_types.size() && info.input_types[weights] &&
      info.input_types[weights]->shape && info.input_types[weights]->shape->size() == 4) {
    const SymbolicShape& dims = *info.input_types[weights]->shape;
    if (dims[2].is_known() && dims[3].is_known()) kernel = {dims[2].value, dims[3].value};
  }
  return kernel == std::vector<int64_t>{3, 3};
}

/// A convolution compiled for one set of shapes.
struct ConvPrimitive {
  bool usable = false;  // false: oneDNN rejected this shape, run the reference kernel
  dnnl::primitive prim;
  dnnl::memory::desc src_md, weights_md, dst_md;
  dnnl::memory::desc user_weights_md;  // the ONNX weights layout, viewed in oneDNN's dims order
  dnnl::memory::desc bias_md;          // plain [M]; empty without a bias
  dnnl::memory::desc scratchpad_md;
  Shape out_shape;
  std::string impl;  // oneDNN's name for the implementation it picked ("ref:any" is the slow one)
};

/// Fills `p` with an inference convolution from `src` to `dst` (fixed layouts, or
/// format_tag::any to let oneDNN choose), for ONNX weights of shape `weights` in `group`
/// groups and the resolved window geometry `g`; weights and bias have src's data type (f32,
/// bf16 or f16). Leaves p.usable false when oneDNN rejects it (on this CPU: f16 without
/// AVX512_FP16).
/// `attr` may carry post-ops; it must use a user scratchpad (concurrent_attr()).
inline void build_conv_primitive(ConvPrimitive& p, const dnnl::memory::desc& src,
                                 const dnnl::memory::desc& dst, const Shape& weights, int64_t group,
                                 bool has_bias, const WindowGeometry& g,
                                 const dnnl::primitive_attr& attr = concurrent_attr(),
                                 dnnl::algorithm algorithm = dnnl::algorithm::convolution_direct) {
  using dnnl::memory;
  // Grouped weights are [g, M/g, C/g, k...]: the same memory as ONNX's [M, C/g, k...].
  Shape wshape = weights;
  if (group > 1) {
    wshape[0] /= group;
    wshape.insert(wshape.begin(), group);
  }
  const memory::data_type type = src.data_type();
  p.user_weights_md = plain_desc(wshape, type);
  memory::dims dilations;
  for (int64_t d : g.dilations) dilations.push_back(d - 1);  // oneDNN counts dilation from 0
  try {
    memory::desc weights_any(to_dims(wshape), type, memory::format_tag::any);
    p.bias_md = has_bias ? plain_desc({weights[0]}, type) : memory::desc();
    dnnl::convolution_forward::desc desc(dnnl::prop_kind::forward_inference, algorithm, src,
                                         weights_any, p.bias_md, dst, to_dims(g.strides), dilations,
                                         to_dims(g.pads_begin), to_dims(g.pads_end));
    dnnl::convolution_forward::primitive_desc pd(desc, attr, cpu_engine());
    p.scratchpad_md = pd.scratchpad_desc();
    p.src_md = pd.src_desc();
    p.weights_md = pd.weights_desc();
    p.dst_md = pd.dst_desc();
    p.impl = pd.impl_info_str();
    p.prim = dnnl::convolution_forward(pd);
    p.usable = true;
  } catch (const dnnl::error&) {
    p.usable = false;
  }
}

}  // namespace dprun::onednn
