// ConvChainNHWC(X, W0, B0, W1, B1, ..., [Z]): convolutions in a chain, each reading the one
// before it and read by nothing else (fuse_channels_last_ops,
// engine/backends/cpu/channels_last_fusion.h), as MobileNetV2's expansion, depthwise and projection
// convolutions. Attribute "steps" counts them; step k's ConvNHWC attributes carry the prefix
// "<k>:". With "sum" = 1 the last step is a ConvAddNHWC and the last input its addend Z.
//
// The oneDNN path runs the whole chain on a few images at a time, the values between the steps
// in buffers of this thread that stay in cache, instead of each step over the whole batch, whose
// wide intermediate values go to memory and come back: a standalone oneDNN program, one thread,
// batch 32, took 12.0 instead of 16.0 ms for a 1x1 convolution from 24 to 144 channels and a
// depthwise 3x3 one at 56 x 56, 27.9 instead of 41.5 ms from 16 to 96 channels at 112 x 112.
// Other dtypes and shapes oneDNN rejects run the steps' own kernels in turn over the batch.
#include <algorithm>
#include <cstring>
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

namespace dprun {
namespace {

using dnnl::memory;

/// The chain's steps as ConvNHWC (and, last with "sum", ConvAddNHWC) nodes over the fused
/// node's inputs; step k writes "<name>/<k>", which step k + 1 reads.
std::vector<Node> chain_steps(const Node& fused) {
  const int64_t steps = fused.attr_int("steps");
  const bool sum = fused.attr_int("sum", 0) != 0;
  if (steps < 2 || fused.inputs.size() != static_cast<size_t>(1 + 2 * steps + (sum ? 1 : 0)))
    fused.fail("expects X, a weight and a bias (or \"\") per step of ", steps, sum ? " and Z" : "",
               ", got ", fused.inputs.size(), " inputs");
  std::vector<Node> nodes(static_cast<size_t>(steps));
  for (size_t k = 0; k < nodes.size(); ++k) {
    Node& n = nodes[k];
    n.name = fused.name;
    n.domain = kRewriteDomain;
    n.op_type = sum && k + 1 == nodes.size() ? "ConvAddNHWC" : "ConvNHWC";
    n.inputs = {k == 0 ? fused.inputs[0] : fused.name + "/" + std::to_string(k - 1),
                fused.inputs[1 + 2 * k], fused.inputs[2 + 2 * k]};
    if (n.op_type == "ConvAddNHWC")
      n.inputs.push_back(fused.inputs.back());
    else if (n.inputs.back().empty())
      n.inputs.pop_back();
    n.outputs = {k + 1 == nodes.size() ? fused.outputs.at(0)
                                       : fused.name + "/" + std::to_string(k)};
    const std::string prefix = std::to_string(k) + ":";
    for (const auto& [key, value] : fused.attributes)
      if (key.rfind(prefix, 0) == 0) n.attributes[key.substr(prefix.size())] = value;
  }
  return nodes;
}

/// The steps' own kernels (of `impl`, "" for the best), run in turn over the whole batch.
class StepsInTurn {
 public:
  StepsInTurn(const KernelInfo& info, const std::string& impl) {
    const std::vector<Node> nodes = chain_steps(info.node);
    for (size_t k = 0; k < nodes.size(); ++k) {
      // The fused node's inputs that step k reads: X (the first step's only), W, B, then Z.
      std::vector<size_t> sources = {k == 0 ? 0 : PartKernel::kInner, 1 + 2 * k};
      if (nodes[k].inputs.size() > 2) sources.push_back(2 + 2 * k);
      if (nodes[k].inputs.size() > 3) sources.push_back(info.node.inputs.size() - 1);
      steps_.emplace_back(info, nodes[k], sources, impl);
    }
  }

  void compute(KernelContext& ctx) const {
    Tensor value;
    for (size_t k = 0; k < steps_.size(); ++k) {
      const size_t count = steps_[k].node().inputs.size();
      std::vector<const Tensor*> inputs = {k == 0 ? &ctx.input(0) : &value, &ctx.input(1 + 2 * k)};
      if (count > 2) inputs.push_back(ctx.optional_input(2 + 2 * k));
      if (count > 3) inputs.push_back(&ctx.input(ctx.input_count() - 1));
      value = steps_[k].run(ctx, inputs);
    }
    ctx.set_output(0, std::move(value));
  }

  const Node& step(size_t k) const { return steps_[k].node(); }
  size_t size() const { return steps_.size(); }

 private:
  std::vector<PartKernel> steps_;
};

/// Every step's convolution for one set of shapes, on `tile` images at a time.
struct ChainPrimitives {
  bool usable = false;
  onednn::ImageTiles tiles;
  std::vector<onednn::ConvPrimitive> steps;  // out_shape: the step's output for `tile` images
  Shape out_shape;                           // the chain's output for the whole batch
  size_t buffer_floats = 0;                  // the largest value between two steps, per tile
};

class ConvChainOnednnKernel : public OpKernel {
 public:
  explicit ConvChainOnednnKernel(const KernelInfo& info) : unfused_(info, "") {
    for (size_t k = 0; k < unfused_.size(); ++k) {
      const Node& step = unfused_.step(k);
      attrs_.emplace_back();
      attrs_.back().parse(step);
      activations_.emplace_back(step);
      groups_.push_back(step.attr_int("group", 1));
      weights_.push_back(
          std::make_unique<onednn::PackedWeights>(info.constant_inputs.count(1 + 2 * k) > 0));
    }
    sum_ = info.node.attr_int("sum", 0) != 0;
    steps_in_turn_ = has_winograd_step(info);
  }

  void compute(KernelContext& ctx) const override {
    // The steps' own kernels run a Winograd convolution where --allow-winograd lets them.
    if (steps_in_turn_ || !fits(ctx)) return unfused_.compute(ctx);  // or reports the error
    std::vector<int64_t> key;
    for (size_t i = 0; i < ctx.input_count(); ++i) {
      if (const Tensor* t = ctx.optional_input(i))
        key.insert(key.end(), t->shape().begin(), t->shape().end());
      key.push_back(-1);
    }
    onednn::run_sized(ctx, multiply_adds(ctx), [&] {
      key.push_back(ctx.threads());  // the tiling depends on it
      auto p = cache_.get(key, [&] { return build(ctx); });
      if (!p->usable || (sum_ && ctx.input(ctx.input_count() - 1).shape() != p->out_shape))
        return unfused_.compute(ctx);
      run(ctx, *p);
    });
  }

 private:
  /// Whether a step may be a Winograd convolution (onednn::may_run_winograd).
  bool has_winograd_step(const KernelInfo& info) const {
    for (size_t k = 0; k < unfused_.size(); ++k)
      if (onednn::may_run_winograd(info, unfused_.step(k), 1 + 2 * k)) return true;
    return false;
  }

  /// The chain's multiply-adds, near enough for onednn::run_sized: each step's input pixels
  /// follow from the strides before it.
  double multiply_adds(const KernelContext& ctx) const {
    const Tensor& x = ctx.input(0);
    double pixels = static_cast<double>(x.dim(1)) * static_cast<double>(x.dim(2)), sum = 0;
    for (size_t k = 0; k < weights_.size(); ++k) {
      const double step =
          onednn::conv_multiply_adds(x.dim(0), 1, ctx.input(1 + 2 * k).shape(), attrs_[k].strides);
      sum += step * pixels;
      for (int64_t s : attrs_[k].strides) pixels /= static_cast<double>(std::max<int64_t>(s, 1));
    }
    return sum;
  }

  /// float32 throughout, 4-D X and weights, 1-D biases of the weights' output channels.
  bool fits(const KernelContext& ctx) const {
    for (size_t i = 0; i < ctx.input_count(); ++i)
      if (const Tensor* t = ctx.optional_input(i); t && t->dtype() != DType::Float32) return false;
    if (ctx.input(0).rank() != 4) return false;
    for (size_t k = 0; k < weights_.size(); ++k) {
      const Tensor& w = ctx.input(1 + 2 * k);
      const Tensor* b = ctx.optional_input(2 + 2 * k);
      if (w.rank() != 4 || groups_[k] <= 0 || w.dim(0) % groups_[k] != 0 ||
          (b && (b->rank() != 1 || b->dim(0) != w.dim(0))) ||
          (!attrs_[k].kernel_shape.empty() &&
           attrs_[k].kernel_shape != std::vector<int64_t>(w.shape().begin() + 2, w.shape().end())))
        return false;
    }
    return true;
  }

  /// The steps' primitives on a tile of images: the largest divisor of the batch whose widest
  /// value between steps takes at most kTileBytes (one image when even that is wider) and, with
  /// several threads and at least as many images, that leaves a tile for each thread.
  std::shared_ptr<const ChainPrimitives> build(const KernelContext& ctx) const {
    constexpr size_t kTileBytes = 1 << 20;  // about a core's L2
    auto p = std::make_shared<ChainPrimitives>();
    const Tensor& x = ctx.input(0);
    const int64_t n = x.dim(0);
    // Per-image shapes of every step's input and output (NHWC without N).
    std::vector<Shape> shapes = {{x.dim(1), x.dim(2), x.dim(3)}};
    std::vector<WindowGeometry> geometry;
    for (size_t k = 0; k < weights_.size(); ++k) {
      const Tensor& w = ctx.input(1 + 2 * k);
      const Shape& in = shapes.back();
      if (in[2] != w.dim(1) * groups_[k]) return p;  // the unfused kernels report it
      const std::vector<int64_t> kernel(w.shape().begin() + 2, w.shape().end());
      geometry.push_back(attrs_[k].resolve(unfused_.step(k), {in[0], in[1]}, kernel));
      shapes.push_back({geometry.back().out[0], geometry.back().out[1], w.dim(0)});
    }
    p->out_shape = {n, shapes.back()[0], shapes.back()[1], shapes.back()[2]};
    if (n == 0 || shape_numel(p->out_shape) == 0) return p;
    size_t widest = 0;
    for (size_t k = 1; k + 1 < shapes.size(); ++k)
      widest = std::max(widest, static_cast<size_t>(shape_numel(shapes[k])));
    p->tiles = onednn::ImageTiles::of(n, static_cast<int64_t>(widest * sizeof(float)), kTileBytes,
                                      ctx.threads());
    const int64_t tile = p->tiles.tile;
    p->buffer_floats = static_cast<size_t>(tile) * widest;
    p->steps.resize(weights_.size());
    for (size_t k = 0; k < weights_.size(); ++k) {
      const bool last = k + 1 == weights_.size();
      dnnl::post_ops ops;
      if (last && sum_) ops.append_sum(1.f);
      activations_[k].append_to(ops);
      dnnl::primitive_attr attr = onednn::concurrent_attr();
      attr.set_post_ops(ops);
      const Shape& in = shapes[k];
      const Shape& out = shapes[k + 1];
      onednn::build_conv_primitive(p->steps[k], onednn::nhwc_desc(tile, in[2], in[0], in[1]),
                                   onednn::nhwc_desc(tile, out[2], out[0], out[1]),
                                   ctx.input(1 + 2 * k).shape(), groups_[k],
                                   ctx.optional_input(2 + 2 * k) != nullptr, geometry[k], attr);
      if (!p->steps[k].usable) return p;
      p->steps[k].out_shape = {tile, out[0], out[1], out[2]};
    }
    p->usable = true;
    return p;
  }

  void run(KernelContext& ctx, const ChainPrimitives& p) const {
    const Tensor& x = ctx.input(0);
    Tensor& y =
        sum_ ? ctx.allocate_output_reusing(0, ctx.input_count() - 1, p.out_shape, DType::Float32)
             : ctx.allocate_output(0, p.out_shape, DType::Float32);
    // The addend, copied a tile at a time right before the last step adds to it, unless the
    // output was placed over it.
    const float* z = sum_ ? ctx.input(ctx.input_count() - 1).data<float>() : nullptr;
    if (z == y.data<float>()) z = nullptr;
    std::vector<dnnl::memory> weights;
    for (size_t k = 0; k < p.steps.size(); ++k)
      weights.push_back(weights_[k]->get(ctx, ctx.input(1 + 2 * k), p.steps[k].user_weights_md,
                                         p.steps[k].weights_md));
    p.tiles.for_each(ctx, x.dim(0), [&](int64_t t) { run_tile(ctx, p, weights, t, z, y); });
  }

  /// The chain on tile `t`, the values between steps in this thread's buffers.
  void run_tile(KernelContext& ctx, const ChainPrimitives& p,
                const std::vector<dnnl::memory>& weights, int64_t t, const float* z,
                Tensor& y) const {
    const Tensor& x = ctx.input(0);
    const int64_t first = t * p.tiles.tile;
    const int64_t in_image = x.numel() / x.dim(0), out_image = y.numel() / y.dim(0);
    float* buffers[2] = {onednn::aligned_thread_buffer<ChainPrimitives>(0, p.buffer_floats),
                         onednn::aligned_thread_buffer<ChainPrimitives>(1, p.buffer_floats)};
    const float* src = x.data<float>() + first * in_image;
    for (size_t k = 0; k < p.steps.size(); ++k) {
      const onednn::ConvPrimitive& step = p.steps[k];
      const bool last = k + 1 == p.steps.size();
      float* dst = last ? y.data<float>() + first * out_image : buffers[k % 2];
      if (last && z)
        std::memcpy(dst, z + first * out_image,
                    static_cast<size_t>(p.tiles.tile * out_image) * sizeof(float));
      const onednn::MemoryArg src_arg{DNNL_ARG_SRC, &step.src_md, src};
      const onednn::MemoryArg weights_arg{DNNL_ARG_WEIGHTS, nullptr, nullptr, weights[k]};
      const onednn::MemoryArg dst_arg{DNNL_ARG_DST, &step.dst_md, dst};
      if (const Tensor* b = ctx.optional_input(2 + 2 * k))
        onednn::execute_reusing(
            step.prim, step.scratchpad_md,
            {src_arg, weights_arg, dst_arg, {DNNL_ARG_BIAS, &step.bias_md, b->raw_data()}});
      else
        onednn::execute_reusing(step.prim, step.scratchpad_md, {src_arg, weights_arg, dst_arg});
      if (activations_[k].applied_after_onednn())  // split over threads unless tiles are
        ctx.parallel_for(shape_numel(step.out_shape), 1 << 14, [&](int64_t begin, int64_t end) {
          activations_[k].apply(dst + begin, end - begin);
        });
      src = dst;
    }
  }

  StepsInTurn unfused_;
  std::vector<WindowAttrs> attrs_;
  std::vector<FusedActivation> activations_;
  std::vector<int64_t> groups_;
  std::vector<std::unique_ptr<onednn::PackedWeights>> weights_;
  bool sum_ = false;
  bool steps_in_turn_ = false;
  onednn::ShapeCache<ChainPrimitives> cache_;
};

DPRUN_REGISTER_KERNEL({.domain = kRewriteDomain,
                       .op_type = "ConvChainNHWC",
                       .factory = make_kernel<UnfusedReferenceKernel<StepsInTurn>>});
DPRUN_REGISTER_KERNEL({.domain = kRewriteDomain,
                       .op_type = "ConvChainNHWC",
                       .dtypes = {DType::Float32},
                       .priority = 10,
                       .impl = "onednn",
                       .factory = make_kernel<ConvChainOnednnKernel>});

}  // namespace
}  // namespace dprun
