#pragma once
// The oneDNN pooling shared by the NCHW (pool_onednn.cpp) and NHWC (conv_nhwc.cpp) MaxPool and
// AveragePool kernels: they differ only in the activation layouts they ask for.
#include <string>
#include <vector>

#include "ops/common/conv_util.h"
#include "ops/cpu/onednn_util.h"

namespace dprun::onednn {

/// A pooling primitive compiled for one input shape.
struct PoolPrimitive {
  bool usable = false;  // false: oneDNN cannot express this case, run the reference kernel
  dnnl::pooling_v2_forward prim;
  dnnl::memory::desc src_md, dst_md, scratchpad_md;
  Shape out_shape;
  std::string impl;  // oneDNN's name for the implementation it picked
};

/// Fills `p` with an inference pooling from `src` to `dst` (f32, bf16 or f16) over spatial sizes
/// `in` and the resolved window geometry `g` (`dst` may leave its layout to oneDNN:
/// format_tag::any). Leaves p.usable false for cases oneDNN would compute differently (averages
/// with dilation; count_include_pad windows past the end padding).
inline void build_pool_primitive(PoolPrimitive& p, const dnnl::memory::desc& src,
                                 const dnnl::memory::desc& dst, const std::vector<int64_t>& in,
                                 const WindowGeometry& g, bool is_max, bool count_include_pad) {
  const size_t nd = g.rank();
  dnnl::memory::dims pad_r(nd), dil(nd);
  for (size_t i = 0; i < nd; ++i) {
    const int64_t ext = (g.kernel[i] - 1) * g.dilations[i] + 1;
    // oneDNN derives the output size from the padding: the end padding absorbs ceil_mode.
    pad_r[i] = (g.out[i] - 1) * g.strides[i] + ext - in[i] - g.pads_begin[i];
    dil[i] = g.dilations[i] - 1;
    // Windows hanging past the declared end padding would be counted as padding by oneDNN.
    if (count_include_pad && pad_r[i] > g.pads_end[i]) return;
    if (!is_max && g.dilations[i] != 1) return;
  }
  try {
    auto alg = is_max              ? dnnl::algorithm::pooling_max
               : count_include_pad ? dnnl::algorithm::pooling_avg_include_padding
                                   : dnnl::algorithm::pooling_avg_exclude_padding;
    dnnl::pooling_v2_forward::desc desc(dnnl::prop_kind::forward_inference, alg, src, dst,
                                        to_dims(g.strides), to_dims(g.kernel), dil,
                                        to_dims(g.pads_begin), pad_r);
    dnnl::pooling_v2_forward::primitive_desc pd(desc, concurrent_attr(), cpu_engine());
    p.src_md = pd.src_desc();
    p.dst_md = pd.dst_desc();
    p.impl = pd.impl_info_str();
    p.scratchpad_md = pd.scratchpad_desc();
    p.prim = dnnl::pooling_v2_forward(pd);
    p.usable = true;
  } catch (const dnnl::error&) {
    p.usable = false;
  }
}

}  // namespace dprun::onednn
