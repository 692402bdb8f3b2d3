// ConcatConvNHWC(W, B, parts...): ConvNHWC (one group) of the concatenation of NHWC parts along
// channels (fuse_channels_last_ops, engine/backends/cpu/channels_last_fusion.h). A convolution is
// linear in its input channels, so the oneDNN path runs one convolution per part, over that part's
// slice of W's input channels, each after the first adding its result to the output (oneDNN's sum
// post-op, the fused activation after the last): the concatenation is never written. Splitting
// the sum over input channels changes its rounding, not its value. The reference path
// concatenates the parts and runs ConvNHWC's reference kernel.
#include <cstring>
#include <memory>
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

constexpr size_t kFirstPart = 2;  // after W and B

/// The channel count of the concatenation of the node's parts, after checking that they can be
/// concatenated along NHWC channels and that W ([M, C / group, ...]) reads that many.
int64_t concatenated_channels(const KernelContext& ctx, int64_t group) {
  if (ctx.input_count() <= kFirstPart) ctx.fail("expects W, B and at least one part");
  const Tensor& first = ctx.input(kFirstPart);
  if (first.rank() != 4) ctx.fail("parts must be 4-D (NHWC), got ", first.describe());
  int64_t channels = 0;
  for (size_t p = kFirstPart; p < ctx.input_count(); ++p) {
    const Tensor& part = ctx.input(p);
    if (part.dtype() != first.dtype() || part.rank() != 4 || part.dim(0) != first.dim(0) ||
        part.dim(1) != first.dim(1) || part.dim(2) != first.dim(2))
      ctx.fail("part ", p - kFirstPart, " ", part.describe(), " cannot be concatenated with ",
               first.describe(), " along channels");
    channels += part.dim(3);
  }
  const Tensor& w = ctx.input(0);
  if (w.rank() >= 2 && w.dim(1) * group != channels)
    ctx.fail("the parts hold ", channels, " channels in all; W ", w.describe(), " in ", group,
             group == 1 ? " group reads " : " groups reads ", w.dim(1) * group);
  return channels;
}

/// The node's ConvNHWC over the materialized concatenation: the reference path, and the oneDNN
/// path's fallback for what oneDNN does not take (other dtypes, shapes it rejects).
class ConcatThenConv {
 public:
  /// `impl`: the ConvNHWC implementation to run ("" for the best that accepts the node).
  ConcatThenConv(const KernelInfo& info, const std::string& impl)
      : conv_(info, conv_node(info.node), conv_sources(info.node), impl),
        group_(info.node.attr_int("group", 1)) {}

  void compute(KernelContext& ctx) const {
    const int64_t channels = concatenated_channels(ctx, group_);
    const Tensor& first = ctx.input(kFirstPart);
    const int64_t pixels = first.dim(0) * first.dim(1) * first.dim(2);
    const size_t esize = dtype_size(first.dtype());
    Tensor cat = Tensor::empty({first.dim(0), first.dim(1), first.dim(2), channels}, first.dtype(),
                               ctx.device());
    char* dst = static_cast<char*>(cat.raw_data());
    ctx.parallel_for(pixels, 64, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        int64_t offset = 0;
        for (size_t p = kFirstPart; p < ctx.input_count(); ++p) {
          const Tensor& part = ctx.input(p);
          const size_t row = static_cast<size_t>(part.dim(3)) * esize;
          std::memcpy(dst + (r * channels + offset) * static_cast<int64_t>(esize),
                      static_cast<const char*>(part.raw_data()) + r * static_cast<int64_t>(row),
                      row);
          offset += part.dim(3);
        }
      }
    });
    std::vector<const Tensor*> inputs = {&cat, &ctx.input(0)};
    if (conv_.node().inputs.size() > 2) inputs.push_back(&ctx.input(1));
    ctx.set_output(0, conv_.run(ctx, inputs));
  }

 private:
  /// The ConvNHWC of the node's attributes over "<name>/concatenation", W and B (if any).
  static Node conv_node(const Node& fused) {
    Node conv = fused;
    conv.op_type = "ConvNHWC";
    conv.inputs = {fused.name + "/concatenation", fused.inputs.at(0)};
    if (fused.inputs.size() > 1 && !fused.inputs[1].empty()) conv.inputs.push_back(fused.inputs[1]);
    return conv;
  }
  static std::vector<size_t> conv_sources(const Node& fused) {
    if (fused.inputs.size() > 1 && !fused.inputs[1].empty()) return {PartKernel::kInner, 0, 1};
    return {PartKernel::kInner, 0};
  }

  PartKernel conv_;
  int64_t group_;
};

/// One convolution per part, for one set of shapes.
struct SplitConvolution {
  bool usable = false;
  std::vector<onednn::ConvPrimitive> parts;
  Shape out_shape;
};

class ConcatConvOnednnKernel : public OpKernel {
 public:
  explicit ConcatConvOnednnKernel(const KernelInfo& info)
      : unfused_(info, ""), activation_(info.node), group_(info.node.attr_int("group", 1)) {
    attrs_.parse(info.node);
    const bool constant = info.constant_inputs.count(0) > 0;
    for (size_t p = kFirstPart; p < info.node.inputs.size(); ++p)
      weights_.push_back(std::make_unique<onednn::PackedWeights>(constant));
  }

  void compute(KernelContext& ctx) const override {
    concatenated_channels(ctx, group_);  // the parts fit each other and W, or it reports why
    const Tensor& w = ctx.input(0);
    const Tensor* b = ctx.optional_input(1);
    const Tensor& first = ctx.input(kFirstPart);
    if (first.dtype() != DType::Float32 || w.dtype() != DType::Float32 || w.rank() != 4 ||
        group_ != 1 ||
        (b && (b->dtype() != DType::Float32 || b->rank() != 1 || b->dim(0) != w.dim(0))) ||
        (!attrs_.kernel_shape.empty() &&
         attrs_.kernel_shape != std::vector<int64_t>(w.shape().begin() + 2, w.shape().end())))
      return unfused_.compute(ctx);  // runs it, or reports what is wrong
    onednn::run_sized(ctx, onednn::nhwc_conv_multiply_adds(first, w, attrs_.strides),
                      [&] { run(ctx, w, b); });
  }

 private:
  /// The oneDNN path, on the threads run_sized gives it.
  void run(KernelContext& ctx, const Tensor& w, const Tensor* b) const {
    auto p = cache_.get(key(ctx), [&] { return build(ctx, b != nullptr); });
    if (!p->usable) return unfused_.compute(ctx);
    Tensor& y = ctx.allocate_output(0, p->out_shape, DType::Float32);
    for (size_t k = 0; k < p->parts.size(); ++k) {
      const onednn::ConvPrimitive& part = p->parts[k];
      const onednn::MemoryArg src{DNNL_ARG_SRC, &part.src_md, ctx.input(kFirstPart + k).raw_data()};
      const onednn::MemoryArg weights{
          DNNL_ARG_WEIGHTS, nullptr, nullptr,
          weights_[k]->get(ctx, w, part.user_weights_md, part.weights_md)};
      const onednn::MemoryArg dst{DNNL_ARG_DST, &part.dst_md, y.raw_data()};
      if (k == 0 && b)
        onednn::execute_reusing(part.prim, part.scratchpad_md,
                                {src, weights, dst, {DNNL_ARG_BIAS, &part.bias_md, b->raw_data()}});
      else
        onednn::execute_reusing(part.prim, part.scratchpad_md, {src, weights, dst});
    }
    activation_.apply_after_onednn(ctx, y);
  }

  /// The cache key: every part's shape, then W's and B's.
  static std::vector<int64_t> key(const KernelContext& ctx) {
    std::vector<int64_t> key;
    for (size_t i = 0; i < ctx.input_count(); ++i) {
      if (const Tensor* t = ctx.optional_input(i))
        key.insert(key.end(), t->shape().begin(), t->shape().end());
      key.push_back(-1);
    }
    return key;
  }

  /// Part k reads W[:, offset_k : offset_k + C_k] in place (a strided view of W's memory, which
  /// PackedWeights reorders once); the first part adds the bias, the others a sum post-op, and
  /// the last the activation.
  std::shared_ptr<const SplitConvolution> build(const KernelContext& ctx, bool has_bias) const {
    auto s = std::make_shared<SplitConvolution>();
    const Tensor& w = ctx.input(0);
    const Tensor& first = ctx.input(kFirstPart);
    const int64_t n = first.dim(0), h = first.dim(1), wd = first.dim(2), m = w.dim(0);
    const std::vector<int64_t> kernel(w.shape().begin() + 2, w.shape().end());
    const WindowGeometry g = attrs_.resolve(ctx.node(), {h, wd}, kernel);
    s->out_shape = {n, g.out[0], g.out[1], m};
    if (shape_numel(s->out_shape) == 0) return s;  // ConvNHWC handles empty outputs
    const memory::desc whole_weights = onednn::plain_desc(w.shape());
    const memory::desc dst = onednn::nhwc_desc(n, m, g.out[0], g.out[1]);
    const size_t count = ctx.input_count() - kFirstPart;
    s->parts.resize(count);
    int64_t offset = 0;
    for (size_t k = 0; k < count; ++k) {
      const int64_t c = ctx.input(kFirstPart + k).dim(3);
      dnnl::post_ops ops;
      if (k > 0) ops.append_sum(1.f);
      if (k + 1 == count) activation_.append_to(ops);
      dnnl::primitive_attr attr = onednn::concurrent_attr();
      attr.set_post_ops(ops);
      const Shape part_weights = {m, c, kernel[0], kernel[1]};
      onednn::ConvPrimitive& part = s->parts[k];
      onednn::build_conv_primitive(part, onednn::nhwc_desc(n, c, h, wd), dst, part_weights, 1,
                                   has_bias && k == 0, g, attr);
      if (!part.usable) return s;
      part.user_weights_md =
          whole_weights.submemory_desc(onednn::to_dims(part_weights), {0, offset, 0, 0});
      offset += c;
    }
    s->usable = true;
    return s;
  }

  ConcatThenConv unfused_;
  FusedActivation activation_;
  int64_t group_;
  WindowAttrs attrs_;
  onednn::ShapeCache<SplitConvolution> cache_;
  std::vector<std::unique_ptr<onednn::PackedWeights>> weights_;  // one per part
};

DPRUN_REGISTER_KERNEL({.domain = kRewriteDomain,
                       .op_type = "ConcatConvNHWC",
                       .dtype_input = static_cast<int>(kFirstPart),
                       .factory = make_kernel<UnfusedReferenceKernel<ConcatThenConv>>});
DPRUN_REGISTER_KERNEL({.domain = kRewriteDomain,
                       .op_type = "ConcatConvNHWC",
                       .dtypes = {DType::Float32},
                       .dtype_input = static_cast<int>(kFirstPart),
                       .priority = 10,
                       .impl = "onednn",
                       .factory = make_kernel<ConcatConvOnednnKernel>});

}  // namespace
}  // namespace dprun
