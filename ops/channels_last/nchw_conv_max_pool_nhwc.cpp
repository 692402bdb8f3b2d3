// NchwConvMaxPoolNHWC(X, W, B): MaxPoolNHWC(ConvNHWC(Transpose(X, perm [0, 2, 3, 1]), W, B)), a
// network's first convolution, over an NCHW input of a few channels, and the max pool after it
// (fuse_channels_last_ops, engine/backends/cpu/channels_last_fusion.h). The ConvNHWC attributes are
// the node's own; the MaxPoolNHWC's carry the prefix "pool:". X is NCHW, the output NHWC.
//
// oneDNN convolves a few-channel NCHW input into its blocked layout (nChw16c) much faster than
// an NHWC one into NHWC, and the NCHW input needs no transpose: the oneDNN path runs the
// convolution, the pool (in the blocked layout) and a reorder of the pooled result into the NHWC
// output, a few images at a time, so that the convolution's output, the widest value of the
// network, is read back by the pool from cache. A standalone oneDNN program, SqueezeNet 1.1's
// first layers (3 to 64 channels, 3x3 stride 2 at 224 x 224, then a 3x3 stride-2 max pool),
// batch 8, one thread: 5.3-7.0 ms as transpose, NHWC convolution and NHWC pool, 3.4-4.2 ms this
// way two images at a time (4.3-6.0 ms the whole batch at once). For a 7x7 window (ResNet's)
// oneDNN's NHWC convolution is the faster one, so the fusion takes windows up to 3x3.
// Other dtypes and shapes oneDNN rejects run the three parts' own kernels in turn.
#include <memory>
#include <string>
#include <vector>

#include "engine/kernel.h"
#include "engine/rewrites/rewrite_domain.h"
#include "ops/channels_last/unfused_kernel.h"
#include "ops/common/conv_util.h"
#include "ops/conv/conv_primitive.h"
#include "ops/cpu/fused_activation.h"
#include "ops/cpu/onednn_util.h"
#include "ops/cpu/packed_weights.h"
#include "ops/pool/pool_primitive.h"

namespace dprun {
namespace {

using dnnl::memory;

constexpr char kPoolPrefix[] = "pool:";

/// The node's three parts as separate kernels of `impl` ("" for the best): the Transpose to
/// NHWC, the ConvNHWC and the MaxPoolNHWC.
class TransposeConvPool {
 public:
  TransposeConvPool(const KernelInfo& info, const std::string& impl)
      : transpose_(info, transpose_node(info.node), {0}, impl),
        conv_(info, conv_node(info.node), conv_sources(info.node), impl),
        pool_(info, pool_node(info.node), {PartKernel::kInner}, impl) {}

  void compute(KernelContext& ctx) const {
    const Tensor nhwc = transpose_.run(ctx, {&ctx.input(0)});
    std::vector<const Tensor*> conv_inputs = {&nhwc, &ctx.input(1)};
    if (const Tensor* b = ctx.optional_input(2)) conv_inputs.push_back(b);
    const Tensor convolution = conv_.run(ctx, conv_inputs);
    ctx.set_output(0, pool_.run(ctx, {&convolution}));
  }

  const Node& conv() const { return conv_.node(); }
  const Node& pool() const { return pool_.node(); }

 private:
  static Node transpose_node(const Node& fused) {
    if (fused.inputs.size() < 2 || fused.inputs.size() > 3)
      fused.fail("expects X, W and an optional B, got ", fused.inputs.size(), " inputs");
    Node t;
    t.name = fused.name + "/nhwc";
    t.op_type = "Transpose";
    t.inputs = {fused.inputs[0]};
    t.outputs = {fused.name + "/nhwc"};
    t.attributes["perm"] = Attribute::of_ints({0, 2, 3, 1});
    return t;
  }
  /// The ConvNHWC of the node's attributes without "pool:", writing "<name>/convolution".
  static Node conv_node(const Node& fused) {
    Node conv;
    conv.name = fused.name;
    conv.domain = kRewriteDomain;
    conv.op_type = "ConvNHWC";
    conv.inputs = {fused.name + "/nhwc", fused.inputs[1]};
    if (fused.inputs.size() > 2 && !fused.inputs[2].empty()) conv.inputs.push_back(fused.inputs[2]);
    conv.outputs = {fused.name + "/convolution"};
    for (const auto& [key, value] : fused.attributes)
      if (key.rfind(kPoolPrefix, 0) != 0) conv.attributes[key] = value;
    return conv;
  }
  static std::vector<size_t> conv_sources(const Node& fused) {
    if (fused.inputs.size() < 3 || fused.inputs[2].empty()) return {PartKernel::kInner, 1};
    return {PartKernel::kInner, 1, 2};
  }
  /// The MaxPoolNHWC of the "pool:" attributes, writing the node's output.
  static Node pool_node(const Node& fused) {
    Node pool;
    pool.name = fused.name + "/pool";
    pool.domain = kRewriteDomain;
    pool.op_type = "MaxPoolNHWC";
    pool.inputs = {fused.name + "/convolution"};
    pool.outputs = fused.outputs;
    const std::string prefix = kPoolPrefix;
    for (const auto& [key, value] : fused.attributes)
      if (key.rfind(prefix, 0) == 0) pool.attributes[key.substr(prefix.size())] = value;
    return pool;
  }

  PartKernel transpose_, conv_, pool_;
};

/// The primitives for one set of shapes, on `tile` images at a time.
struct ConvPoolPrimitives {
  bool usable = false;
  onednn::ImageTiles tiles;
  onednn::ConvPrimitive conv;  // NCHW to oneDNN's blocked layout
  onednn::PoolPrimitive pool;  // blocked to blocked
  dnnl::primitive to_nhwc;     // the pooled tile into the NHWC output
  memory::desc to_nhwc_scratchpad_md, nhwc_md;
  Shape out_shape;  // NHWC, the whole batch
};

class NchwConvMaxPoolOnednnKernel : public OpKernel {
 public:
  explicit NchwConvMaxPoolOnednnKernel(const KernelInfo& info)
      : unfused_(info, ""),
        activation_(unfused_.conv()),
        weights_(info.constant_inputs.count(1) > 0) {
    conv_attrs_.parse(unfused_.conv());
    pool_attrs_.parse(unfused_.pool());
  }

  void compute(KernelContext& ctx) const override {
    if (!fits(ctx)) return unfused_.compute(ctx);  // runs it, or reports what is wrong
    const Tensor& x = ctx.input(0);
    const double multiply_adds = onednn::conv_multiply_adds(
        x.dim(0), x.dim(2) * x.dim(3), ctx.input(1).shape(), conv_attrs_.strides);
    onednn::run_sized(ctx, multiply_adds, [&] { run(ctx); });
  }

 private:
  /// float32 throughout, a 4-D X and W of one group, a 2-D window, B of W's output channels.
  bool fits(const KernelContext& ctx) const {
    const Tensor& x = ctx.input(0);
    const Tensor& w = ctx.input(1);
    const Tensor* b = ctx.optional_input(2);
    return x.dtype() == DType::Float32 && w.dtype() == DType::Float32 && x.rank() == 4 &&
           w.rank() == 4 && x.dim(1) == w.dim(1) && unfused_.conv().attr_int("group", 1) == 1 &&
           (!b || (b->dtype() == DType::Float32 && b->rank() == 1 && b->dim(0) == w.dim(0))) &&
           (conv_attrs_.kernel_shape.empty() ||
            conv_attrs_.kernel_shape ==
                std::vector<int64_t>(w.shape().begin() + 2, w.shape().end())) &&
           pool_attrs_.kernel_shape.size() == 2;
  }

  /// The primitives on a tile of images: the largest divisor of the batch whose convolution
  /// output takes at most kTileBytes and, with several threads and at least as many images,
  /// that leaves a tile for each thread. Unusable where oneDNN offers only its reference
  /// implementation for a step.
  std::shared_ptr<const ConvPoolPrimitives> build(const KernelContext& ctx) const {
    // Two images of SqueezeNet's first convolution (6.3 MB) ran faster than one or eight.
    constexpr int64_t kTileBytes = 8 << 20;
    auto p = std::make_shared<ConvPoolPrimitives>();
    const Tensor& x = ctx.input(0);
    const Tensor& w = ctx.input(1);
    const int64_t n = x.dim(0), c = x.dim(1), h = x.dim(2), wd = x.dim(3), m = w.dim(0);
    const WindowGeometry g = conv_attrs_.resolve(
        unfused_.conv(), {h, wd}, std::vector<int64_t>(w.shape().begin() + 2, w.shape().end()));
    const std::vector<int64_t> conv_out = {g.out[0], g.out[1]};
    const WindowGeometry pg =
        pool_attrs_.resolve(unfused_.pool(), conv_out, pool_attrs_.kernel_shape);
    p->out_shape = {n, pg.out[0], pg.out[1], m};
    if (shape_numel(p->out_shape) == 0) return p;  // the unfused kernels handle empty outputs
    const int64_t image_bytes = m * g.out[0] * g.out[1] * static_cast<int64_t>(sizeof(float));
    p->tiles = onednn::ImageTiles::of(n, image_bytes, kTileBytes, ctx.threads());
    const int64_t tile = p->tiles.tile;
    const auto blocked = [](const memory::dims& dims) {
      return memory::desc(dims, memory::data_type::f32, memory::format_tag::any);
    };
    dnnl::primitive_attr attr = onednn::concurrent_attr();
    attr.set_post_ops(activation_.post_ops());
    onednn::build_conv_primitive(
        p->conv, memory::desc({tile, c, h, wd}, memory::data_type::f32, memory::format_tag::nchw),
        blocked({tile, m, g.out[0], g.out[1]}), w.shape(), 1, ctx.optional_input(2) != nullptr, g,
        attr);
    if (!p->conv.usable || is_reference(p->conv.impl)) return p;
    onednn::build_pool_primitive(p->pool, p->conv.dst_md, blocked({tile, m, pg.out[0], pg.out[1]}),
                                 conv_out, pg, /*is_max=*/true, /*count_include_pad=*/false);
    if (!p->pool.usable || is_reference(p->pool.impl)) return p;
    try {
      p->nhwc_md = onednn::nhwc_desc(tile, m, pg.out[0], pg.out[1]);
      dnnl::reorder::primitive_desc to_nhwc(onednn::cpu_engine(), p->pool.dst_md,
                                            onednn::cpu_engine(), p->nhwc_md,
                                            onednn::concurrent_attr());
      p->to_nhwc = dnnl::reorder(to_nhwc);
      p->to_nhwc_scratchpad_md = to_nhwc.scratchpad_desc();
    } catch (const dnnl::error&) {
      return p;
    }
    p->usable = true;
    return p;
  }

  static bool is_reference(const std::string& impl) { return impl.rfind("ref", 0) == 0; }

  /// The oneDNN path, on the threads run_sized gives it; the tiling depends on them.
  void run(KernelContext& ctx) const {
    const Tensor* b = ctx.optional_input(2);
    std::vector<int64_t> key = onednn::shape_key(
        {&ctx.input(0).shape(), &ctx.input(1).shape(), b ? &b->shape() : nullptr});
    key.push_back(ctx.threads());
    auto p = cache_.get(key, [&] { return build(ctx); });
    if (!p->usable) return unfused_.compute(ctx);
    run_batch(ctx, *p);
  }

  /// Every tile of the batch, whole tiles per thread or in turn.
  void run_batch(KernelContext& ctx, const ConvPoolPrimitives& p) const {
    Tensor& y = ctx.allocate_output(0, p.out_shape, DType::Float32);
    const dnnl::memory weights =
        weights_.get(ctx, ctx.input(1), p.conv.user_weights_md, p.conv.weights_md);
    p.tiles.for_each(ctx, p.out_shape[0], [&](int64_t t) { run_tile(ctx, p, weights, t, y); });
  }

  /// Convolution, pool and reorder of tile `t`, the blocked values in this thread's buffers.
  void run_tile(KernelContext& ctx, const ConvPoolPrimitives& p, const dnnl::memory& weights,
                int64_t t, Tensor& y) const {
    const Tensor& x = ctx.input(0);
    const int64_t first = t * p.tiles.tile;
    const int64_t in_image = x.numel() / x.dim(0), out_image = y.numel() / y.dim(0);
    const size_t conv_floats = p.conv.dst_md.get_size() / sizeof(float);
    float* convolved = onednn::aligned_thread_buffer<ConvPoolPrimitives>(0, conv_floats);
    float* pooled = onednn::aligned_thread_buffer<ConvPoolPrimitives>(
        1, p.pool.dst_md.get_size() / sizeof(float));
    const onednn::MemoryArg src{DNNL_ARG_SRC, &p.conv.src_md, x.data<float>() + first * in_image};
    const onednn::MemoryArg weights_arg{DNNL_ARG_WEIGHTS, nullptr, nullptr, weights};
    const onednn::MemoryArg dst{DNNL_ARG_DST, &p.conv.dst_md, convolved};
    if (const Tensor* b = ctx.optional_input(2))
      onednn::execute_reusing(
          p.conv.prim, p.conv.scratchpad_md,
          {src, weights_arg, dst, {DNNL_ARG_BIAS, &p.conv.bias_md, b->raw_data()}});
    else
      onednn::execute_reusing(p.conv.prim, p.conv.scratchpad_md, {src, weights_arg, dst});
    // SiLU, the one activation applied here, keeps the blocked layout's zero padding at zero.
    if (activation_.applied_after_onednn())
      activation_.apply(convolved, static_cast<int64_t>(conv_floats));
    onednn::execute_reusing(
        p.pool.prim, p.pool.scratchpad_md,
        {{DNNL_ARG_SRC, &p.pool.src_md, convolved}, {DNNL_ARG_DST, &p.pool.dst_md, pooled}});
    onednn::execute_reusing(p.to_nhwc, p.to_nhwc_scratchpad_md,
                            {{DNNL_ARG_FROM, &p.pool.dst_md, pooled},
                             {DNNL_ARG_TO, &p.nhwc_md, y.data<float>() + first * out_image}});
  }

  TransposeConvPool unfused_;
  FusedActivation activation_;
  onednn::PackedWeights weights_;
  WindowAttrs conv_attrs_, pool_attrs_;
  onednn::ShapeCache<ConvPoolPrimitives> cache_;
};

DPRUN_REGISTER_KERNEL({.domain = kRewriteDomain,
                       .op_type = "NchwConvMaxPoolNHWC",
                       .factory = make_kernel<UnfusedReferenceKernel<TransposeConvPool>>});
DPRUN_REGISTER_KERNEL({.domain = kRewriteDomain,
                       .op_type = "NchwConvMaxPoolNHWC",
                       .dtypes = {DType::Float32},
                       .priority = 10,
                       .impl = "onednn",
                       .factory = make_kernel<NchwConvMaxPoolOnednnKernel>});

}  // namespace
}  // namespace dprun
