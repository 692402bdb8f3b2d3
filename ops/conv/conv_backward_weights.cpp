#include "ops/conv/conv_backward_weights.h"

#include <algorithm>

#include "engine/kernel.h"

namespace dprun::onednn {

namespace {

using dnnl::memory;

// The descriptor of a row-major tensor of shape `shape` seen with its first two axes swapped.
memory::desc swapped_view(const Shape& shape) {
  memory::dims dims = to_dims(shape), strides = dense_strides(shape);
  std::swap(dims[0], dims[1]);
  std::swap(strides[0], strides[1]);
  return memory::desc(dims, memory::data_type::f32, strides);
}

memory::desc any_like(const memory::desc& view) {
  return memory::desc(view.dims(), memory::data_type::f32, memory::format_tag::any);
}

// The channels-last descriptor of dims (N, C, spatial...).
memory::desc channels_last(const memory::dims& dims) {
  const size_t nd = dims.size() - 2;
  auto tag = nd == 1   ? memory::format_tag::nwc
             : nd == 2 ? memory::format_tag::nhwc
                       : memory::format_tag::ndhwc;
  return memory::desc(dims, memory::data_type::f32, tag);
}

// out = t with its first two axes swapped, in channels-last order: t is [d0, d1, S] (S the
// spatial elements) and out is [d1, S, d0], out[j][s][i] = t[i][j][s]. oneDNN's reorder of
// the strided view does the same an order of magnitude slower.
void swap_to_channels_last(const KernelContext& ctx, const float* t, float* out, int64_t d0,
                           int64_t d1, int64_t spatial) {
  constexpr int64_t kTile = 16;
  const int64_t tiles = (spatial + kTile - 1) / kTile;
  ctx.parallel_for(d1 * tiles, 1, [&](int64_t begin, int64_t end) {
    for (int64_t task = begin; task < end; ++task) {
      const int64_t j = task / tiles, s0 = (task % tiles) * kTile;
      const int64_t s1 = std::min(s0 + kTile, spatial);
      float* o = out + j * spatial * d0;
      for (int64_t i = 0; i < d0; ++i) {
        const float* row = t + (i * d1 + j) * spatial;
        for (int64_t s = s0; s < s1; ++s) o[s * d0 + i] = row[s];
      }
    }
  });
}

// A per-thread buffer of at least `count` floats, reused across calls; `which` selects one
// of two (the source and the output gradient are prepared side by side).
float* thread_buffer(int which, size_t count) {
  thread_local std::vector<float> buffers[2];
  auto& b = buffers[which];
  if (b.size() < count) b.resize(count);
  return b.data();
}

// `t`, stored as `view` describes, as memory of descriptor `md`. With `swapped` views (`t` of
// shape [d0, d1, spatial...] seen as [d1, d0, ...]), channels-last is made by a tiled transpose.
memory prepare(const KernelContext& ctx, const Tensor& t, const memory::desc& view,
               const memory::desc& md, bool swapped, int which, Tensor& keep) {
  if (swapped && md == channels_last(view.dims())) {
    const int64_t d0 = t.dim(0), d1 = t.dim(1);
    const int64_t spatial = t.numel() / std::max<int64_t>(d0 * d1, 1);
    float* buffer = thread_buffer(which, static_cast<size_t>(t.numel()));
    swap_to_channels_last(ctx, t.data<float>(), buffer, d0, d1, spatial);
    return memory(md, cpu_engine(), buffer);
  }
  return to_layout(ctx, wrap(view, t.raw_data()), md, keep);
}

// The backward-weights primitive of the forward convolution `g` (oneDNN counts dilations from
// 0), with the activations in layouts `src` and `diff_dst` and the weights' layout its own.
ConvBackwardWeightsPrimitive build_primitive(const WindowGeometry& g, const memory::desc& src_view,
                                             const memory::desc& diff_dst_view,
                                             const memory::desc& diff_weights_view,
                                             const memory::desc& src, const memory::desc& diff_dst,
                                             Shape out_shape) {
  ConvBackwardWeightsPrimitive p;
  p.out_shape = std::move(out_shape);
  p.src_view = src_view;
  p.diff_dst_view = diff_dst_view;
  p.diff_weights_view = diff_weights_view;
  memory::dims dilations = to_dims(g.dilations);
  for (auto& d : dilations) d -= 1;
  const memory::dims strides = to_dims(g.strides), pad_l = to_dims(g.pads_begin),
                     pad_r = to_dims(g.pads_end);
  try {
    const auto algo = dnnl::algorithm::convolution_direct;
    const memory::desc weights = any_like(diff_weights_view);
    dnnl::convolution_forward::desc fwd(dnnl::prop_kind::forward_training, algo, src, weights,
                                        diff_dst, strides, dilations, pad_l, pad_r);
    dnnl::convolution_forward::primitive_desc fwd_pd(fwd, concurrent_attr(), cpu_engine());
    dnnl::convolution_backward_weights::desc bwd(algo, src, weights, diff_dst, strides, dilations,
                                                 pad_l, pad_r);
    dnnl::convolution_backward_weights::primitive_desc pd(bwd, concurrent_attr(), cpu_engine(),
                                                          fwd_pd);
    p.src_md = pd.src_desc();
    p.diff_dst_md = pd.diff_dst_desc();
    p.diff_weights_md = pd.diff_weights_desc();
    p.scratchpad_md = pd.scratchpad_desc();
    p.prim = dnnl::convolution_backward_weights(pd);
    p.usable = true;
  } catch (const dnnl::error&) {
    p.usable = false;
  }
  return p;
}

}  // namespace

bool prefer_backward_weights(const Shape& a, const Shape& b, const WindowGeometry& g) {
  int64_t kernel = 1, out = 1;
  for (size_t i = 2; i < b.size(); ++i) kernel *= b[i];
  for (int64_t o : g.out) out *= o;
  return a.size() == b.size() && kernel > out;
}

ConvBackwardWeightsPrimitive build_backward_weights(const Shape& a, const Shape& b,
                                                    const WindowGeometry& g) {
  // The forward convolution: input H, kernel O (dilated by the Conv's strides), stride = the
  // Conv's dilation, output K; its end padding makes those sizes consistent.
  const size_t nd = g.rank();
  WindowGeometry forward;
  for (size_t i = 0; i < nd; ++i) {
    const int64_t h = a[i + 2], k = b[i + 2], o = g.out[i];
    forward.in.push_back(h);
    forward.kernel.push_back(o);
    forward.out.push_back(k);
    forward.strides.push_back(g.dilations[i]);
    forward.dilations.push_back(g.strides[i]);
    forward.pads_begin.push_back(g.pads_begin[i]);
    forward.pads_end.push_back((k - 1) * g.dilations[i] + (o - 1) * g.strides[i] + 1 - h -
                               g.pads_begin[i]);
    if (forward.pads_end[i] < 0 || forward.pads_end[i] > g.pads_end[i]) return {};
  }
  Shape out_shape = {a[0], b[0]};
  for (int64_t o : g.out) out_shape.push_back(o);
  // Channels-last activations: swap_to_channels_last produces them quickly.
  const memory::desc src_view = swapped_view(a), diff_dst_view = swapped_view(b);
  ConvBackwardWeightsPrimitive p = build_primitive(
      forward, src_view, diff_dst_view, swapped_view(out_shape), channels_last(src_view.dims()),
      channels_last(diff_dst_view.dims()), out_shape);
  p.swapped = true;
  return p;
}

ConvBackwardWeightsPrimitive build_weight_gradient(const Shape& x, const Shape& dy,
                                                   const WindowGeometry& g, int64_t group) {
  Shape out_shape = {dy[1], x[1] / group};
  out_shape.insert(out_shape.end(), g.kernel.begin(), g.kernel.end());
  // Grouped weights are [G, M / G, C / G, kernel...] (goihw and its kin), the same memory.
  Shape weights = out_shape;
  if (group != 1) {
    weights[0] /= group;
    weights.insert(weights.begin(), group);
  }
  // oneDNN picks the activations' layouts: reordering plain NCHW into its blocked ones is fast.
  const memory::desc src = plain_desc(x), diff_dst = plain_desc(dy);
  return build_primitive(g, src, diff_dst, plain_desc(weights), any_like(src), any_like(diff_dst),
                         out_shape);
}

void execute_backward_weights(const KernelContext& ctx, const ConvBackwardWeightsPrimitive& p,
                              const Tensor& a, const Tensor& b, Tensor& y) {
  Tensor src_copy, diff_dst_copy, diff_weights_copy;  // in the primitive's layouts
  memory src = prepare(ctx, a, p.src_view, p.src_md, p.swapped, 0, src_copy);
  memory diff_dst = prepare(ctx, b, p.diff_dst_view, p.diff_dst_md, p.swapped, 1, diff_dst_copy);
  memory user = wrap(p.diff_weights_view, y.raw_data());
  memory diff_weights = p.diff_weights_md == user.get_desc()
                            ? user
                            : allocated_memory(ctx, p.diff_weights_md, diff_weights_copy);
  execute(
      p.prim, p.scratchpad_md,
      {{DNNL_ARG_SRC, src}, {DNNL_ARG_DIFF_DST, diff_dst}, {DNNL_ARG_DIFF_WEIGHTS, diff_weights}});
  if (diff_weights != user) reorder_into(diff_weights, user);
}

}  // namespace dprun::onednn
