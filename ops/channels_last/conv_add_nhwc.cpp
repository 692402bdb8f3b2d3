// ConvAddNHWC(X, W, B, Z): activation(ConvNHWC(X, W, B) + Z), a convolution whose result's only
// reader is an Add, as in residual blocks (fuse_channels_last_ops,
// engine/backends/cpu/channels_last_fusion.h). The oneDNN path starts the output as Z (Z's own
// memory when Z dies here, else a copy) and lets the convolution add its result with the sum
// post-op, then apply the activation: the Add and the activation cost no pass of their own. Where Z
// broadcasts to the output, or the dtype is not float32, the convolution, the Add and the
// activation run one after another.
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

constexpr size_t kAddend = 3;  // Z

/// The node's three steps as separate kernels: ConvNHWC of `impl` ("" for the best), the Add
/// (with broadcasting), then the activation.
class ConvThenAdd {
 public:
  ConvThenAdd(const KernelInfo& info, const std::string& impl)
      : conv_(info, conv_node(info.node), conv_sources(info.node), impl),
        add_(info, add_node(info.node), {PartKernel::kInner, kAddend}, impl),
        activation_(info.node) {}

  void compute(KernelContext& ctx) const {
    std::vector<const Tensor*> conv_inputs = {&ctx.input(0), &ctx.input(1)};
    if (const Tensor* b = ctx.optional_input(2)) conv_inputs.push_back(b);
    const Tensor convolution = conv_.run(ctx, conv_inputs);
    Tensor sum = add_.run(ctx, {&convolution, &ctx.input(kAddend)});
    activation_.apply(sum);
    ctx.set_output(0, std::move(sum));
  }

 private:
  /// The ConvNHWC of the node's attributes, without the activation, writing
  /// "<name>/convolution".
  static Node conv_node(const Node& fused) {
    if (fused.inputs.size() != 4) fused.fail("expects X, W, B (or none) and Z");
    Node conv = fused;
    conv.op_type = "ConvNHWC";
    conv.outputs = {fused.name + "/convolution"};
    for (const char* attr : {"activation", "activation_min", "activation_max"})
      conv.attributes.erase(attr);
    conv.inputs.resize(fused.inputs[2].empty() ? 2 : 3);
    return conv;
  }
  static std::vector<size_t> conv_sources(const Node& fused) {
    if (fused.inputs.size() > 2 && fused.inputs[2].empty()) return {0, 1};
    return {0, 1, 2};
  }
  static Node add_node(const Node& fused) {
    Node add;
    add.name = fused.name + "/add";
    add.op_type = "Add";
    add.inputs = {fused.name + "/convolution", fused.inputs.at(kAddend)};
    add.outputs = fused.outputs;
    return add;
  }

  PartKernel conv_, add_;
  FusedActivation activation_;
};

class ConvAddOnednnKernel : public OpKernel {
 public:
  explicit ConvAddOnednnKernel(const KernelInfo& info)
      : unfused_(info, ""),
        activation_(info.node),
        weights_(info.constant_inputs.count(1) > 0),
        group_(info.node.attr_int("group", 1)),
        winograd_(onednn::may_run_winograd(info, info.node, 1)) {
    attrs_.parse(info.node);
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    const Tensor& w = ctx.input(1);
    const Tensor* b = ctx.optional_input(2);
    const Tensor& z = ctx.input(kAddend);
    // The ConvNHWC kernel runs a Winograd convolution where --allow-winograd lets it: worth
    // more than the Add's pass.
    if (winograd_ || x.dtype() != DType::Float32 || w.dtype() != DType::Float32 ||
        z.dtype() != DType::Float32 || x.rank() != 4 || w.rank() != 4 || group_ <= 0 ||
        x.dim(3) != w.dim(1) * group_ || w.dim(0) % group_ != 0 ||
        (b && (b->dtype() != DType::Float32 || b->rank() != 1 || b->dim(0) != w.dim(0))) ||
        (!attrs_.kernel_shape.empty() &&
         attrs_.kernel_shape != std::vector<int64_t>(w.shape().begin() + 2, w.shape().end())))
      return unfused_.compute(ctx);  // runs it, or reports what is wrong
    onednn::run_sized(ctx, onednn::nhwc_conv_multiply_adds(x, w, attrs_.strides),
                      [&] { run(ctx, x, w, b, z); });
  }

 private:
  /// The oneDNN path, on the threads run_sized gives it.
  void run(KernelContext& ctx, const Tensor& x, const Tensor& w, const Tensor* b,
           const Tensor& z) const {
    auto p = cache_.get(onednn::shape_key({&x.shape(), &w.shape(), b ? &b->shape() : nullptr}),
                        [&] { return build(ctx, x, w, b != nullptr); });
    if (!p->usable || z.shape() != p->out_shape) return unfused_.compute(ctx);
    Tensor& y = ctx.allocate_output_reusing(0, kAddend, p->out_shape, DType::Float32);
    if (y.raw_data() != z.raw_data()) copy(ctx, z, y);
    const onednn::MemoryArg src{DNNL_ARG_SRC, &p->src_md, x.raw_data()};
    const onednn::MemoryArg weights{DNNL_ARG_WEIGHTS, nullptr, nullptr,
                                    weights_.get(ctx, w, p->user_weights_md, p->weights_md)};
    const onednn::MemoryArg dst{DNNL_ARG_DST, &p->dst_md, y.raw_data()};
    if (b)
      onednn::execute_reusing(p->prim, p->scratchpad_md,
                              {src, weights, dst, {DNNL_ARG_BIAS, &p->bias_md, b->raw_data()}});
    else
      onednn::execute_reusing(p->prim, p->scratchpad_md, {src, weights, dst});
    activation_.apply_after_onednn(ctx, y);
  }

  std::shared_ptr<const onednn::ConvPrimitive> build(const KernelContext& ctx, const Tensor& x,
                                                     const Tensor& w, bool has_bias) const {
    auto p = std::make_shared<onednn::ConvPrimitive>();
    const int64_t n = x.dim(0), h = x.dim(1), wd = x.dim(2), c = x.dim(3), m = w.dim(0);
    const std::vector<int64_t> kernel(w.shape().begin() + 2, w.shape().end());
    const WindowGeometry g = attrs_.resolve(ctx.node(), {h, wd}, kernel);
    p->out_shape = {n, g.out[0], g.out[1], m};
    if (shape_numel(p->out_shape) == 0) return p;  // the unfused kernels handle empty outputs
    dnnl::post_ops ops;
    ops.append_sum(1.f);
    activation_.append_to(ops);
    dnnl::primitive_attr attr = onednn::concurrent_attr();
    attr.set_post_ops(ops);
    onednn::build_conv_primitive(*p, onednn::nhwc_desc(n, c, h, wd),
                                 onednn::nhwc_desc(n, m, g.out[0], g.out[1]), w.shape(), group_,
                                 has_bias, g, attr);
    return p;
  }

  /// y = z, split over the run's threads.
  static void copy(KernelContext& ctx, const Tensor& z, Tensor& y) {
    const float* from = z.data<float>();
    float* to = y.data<float>();
    ctx.parallel_for(z.numel(), 1 << 14, [&](int64_t begin, int64_t end) {
      std::memcpy(to + begin, from + begin, static_cast<size_t>(end - begin) * sizeof(float));
    });
  }

  ConvThenAdd unfused_;
  FusedActivation activation_;
  onednn::PackedWeights weights_;
  int64_t group_;
  bool winograd_;
  WindowAttrs attrs_;
  onednn::ShapeCache<onednn::ConvPrimitive> cache_;
};

DPRUN_REGISTER_KERNEL({.domain = kRewriteDomain,
                       .op_type = "ConvAddNHWC",
                       .factory = make_kernel<UnfusedReferenceKernel<ConvThenAdd>>});
DPRUN_REGISTER_KERNEL({.domain = kRewriteDomain,
                       .op_type = "ConvAddNHWC",
                       .dtypes = {DType::Float32},
                       .priority = 10,
                       .impl = "onednn",
                       .factory = make_kernel<ConvAddOnednnKernel>});

}  // namespace
}  // namespace dprun
