// oneDNN fast paths for Conv and ConvTranspose (1-D to 3-D, groups, dilations) in float32,
// bfloat16 and float16; a float32 Conv shaped like a weight gradient runs as a backward-weights
// primitive. A 16-bit Conv runs oneDNN's 16-bit convolution (float32 sums, rounded once) where
// this CPU has one, else its float32 path over widened copies; a 16-bit ConvTranspose (the data
// gradient of a Conv in mixed-precision training) runs that float32 path.
// Primitives are cached per input shapes; constant weights are reordered into the primitive's
// preferred layout once per parameter version (packed_weights.h), others on every call.
#include <string>
#include <vector>

#include "engine/kernel.h"
#include "ops/common/conv_util.h"
#include "ops/conv/conv_backward_weights.h"
#include "ops/conv/conv_primitive.h"
#include "ops/cpu/onednn_util.h"
#include "ops/cpu/packed_weights.h"
#include "ops/cpu/run_in_float32.h"
#include "ops/input_dtypes.h"

namespace dprun {
namespace {

using dnnl::memory;

using onednn::ConvPrimitive;

memory::dims sub1(const std::vector<int64_t>& v) {
  memory::dims r(v.begin(), v.end());
  for (auto& x : r) x -= 1;  // oneDNN counts dilation from 0
  return r;
}

/// Runs a cached convolution-like primitive on the node's tensors.
void execute_conv(KernelContext& ctx, const ConvPrimitive& p, const Tensor& x, const Tensor& w,
                  const Tensor* b, const onednn::PackedWeights& packed) {
  using namespace onednn;
  Tensor& y = ctx.allocate_output(0, p.out_shape, x.dtype());
  if (y.numel() == 0) return;
  const memory::data_type type = data_type_of(x.dtype());
  Tensor src_copy, weights_copy, dst_copy;  // in the primitive's layouts, where they differ
  memory src = to_layout(ctx, wrap(plain_desc(x.shape(), type), x.raw_data()), p.src_md, src_copy);
  memory weights = packed.get(ctx, w, p.user_weights_md, p.weights_md, &weights_copy);
  memory user_dst = wrap(plain_desc(p.out_shape, type), y.raw_data());
  memory dst =
      p.dst_md == user_dst.get_desc() ? user_dst : allocated_memory(ctx, p.dst_md, dst_copy);
  std::unordered_map<int, memory> args{
      {DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, weights}, {DNNL_ARG_DST, dst}};
  if (b) args.emplace(DNNL_ARG_BIAS, wrap(plain_desc(b->shape(), type), b->raw_data()));
  execute(p.prim, p.scratchpad_md, std::move(args));
  if (dst != user_dst) reorder_into(dst, user_dst);
}

/// Whether X, W and B have the fast paths' dtype `dtype` and ranks.
bool conv_inputs_ok(const KernelContext& ctx, DType dtype = DType::Float32) {
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(1);
  const Tensor* b = ctx.optional_input(2);
  return x.dtype() == dtype && w.dtype() == dtype &&
         (!b || (b->dtype() == dtype && b->rank() == 1)) && x.rank() >= 3 && x.rank() <= 5 &&
         w.rank() == x.rank();
}

class ConvOnednnKernel : public OpKernel {
 public:
  explicit ConvOnednnKernel(const KernelInfo& info)
      : reference_(onednn::make_float32_reference(info)),
        weights_(info.constant_inputs.count(1) > 0) {
    attrs_.parse(info.node);
    group_ = info.node.attr_int("group", 1);
  }

  void compute(KernelContext& ctx) const override {
    const DType dtype = ctx.input(0).dtype();
    if (is_16bit_float(dtype)) return compute_16bit(ctx, dtype);
    if (!conv_inputs_ok(ctx) || !shapes_ok(ctx)) return reference_->compute(ctx);  // reports
    const Tensor& x = ctx.input(0);
    const Tensor& w = ctx.input(1);
    const Tensor* b = ctx.optional_input(2);
    if (group_ == 1 && !b) {  // perhaps a weight gradient (conv_backward_weights.h)
      auto bw = backward_weights_cache_.get(onednn::shape_key({&x.shape(), &w.shape()}),
                                            [&] { return build_backward_weights(ctx, x, w); });
      if (bw->usable) {
        Tensor& y = ctx.allocate_output(0, bw->out_shape, DType::Float32);
        if (y.numel() > 0) onednn::execute_backward_weights(ctx, *bw, x, w, y);
        return;
      }
    }
    auto p = cache_.get(onednn::shape_key({&x.shape(), &w.shape(), b ? &b->shape() : nullptr}),
                        [&] { return build(ctx, x, w, b != nullptr); });
    if (!p->usable) return reference_->compute(ctx);
    execute_conv(ctx, *p, x, w, b, weights_);
  }

 private:
  /// Whether the operands' channels, groups, bias and kernel agree (else the reference reports
  /// what does not).
  bool shapes_ok(const KernelContext& ctx) const {
    const Tensor& x = ctx.input(0);
    const Tensor& w = ctx.input(1);
    const Tensor* b = ctx.optional_input(2);
    const int64_t c = x.dim(1), m = w.dim(0);
    if (group_ <= 0 || c != w.dim(1) * group_ || m % group_ != 0 || (b && b->dim(0) != m))
      return false;
    std::vector<int64_t> kernel(w.shape().begin() + 2, w.shape().end());
    return attrs_.kernel_shape.empty() || attrs_.kernel_shape == kernel;
  }

  /// A bfloat16 or float16 Conv: oneDNN's 16-bit convolution where this CPU has one, else (or
  /// for shapes it does not take) the float32 path over widened copies.
  void compute_16bit(KernelContext& ctx, DType dtype) const {
    const Tensor& x = ctx.input(0);
    const Tensor& w = ctx.input(1);
    const Tensor* b = ctx.optional_input(2);
    check_one_dtype(ctx, "X, W and B", 3);
    if (!conv_inputs_ok(ctx, dtype) || !shapes_ok(ctx)) return run_in_float32(*this, ctx, dtype);
    auto p =
        cache_16bit_.get(onednn::shape_key({&x.shape(), &w.shape(), b ? &b->shape() : nullptr}),
                         [&] { return build(ctx, x, w, b != nullptr); });
    if (!p->usable) return run_in_float32(*this, ctx, dtype);
    execute_conv(ctx, *p, x, w, b, weights_);
  }

  // Usable only for the shapes prefer_backward_weights() picks.
  std::shared_ptr<const onednn::ConvBackwardWeightsPrimitive> build_backward_weights(
      const KernelContext& ctx, const Tensor& x, const Tensor& w) const {
    std::vector<int64_t> in(x.shape().begin() + 2, x.shape().end());
    std::vector<int64_t> kernel(w.shape().begin() + 2, w.shape().end());
    WindowGeometry g = attrs_.resolve(ctx.node(), in, kernel);
    auto p = std::make_shared<onednn::ConvBackwardWeightsPrimitive>();
    if (onednn::prefer_backward_weights(x.shape(), w.shape(), g) && shape_numel(x.shape()) > 0 &&
        shape_numel(w.shape()) > 0)
      *p = onednn::build_backward_weights(x.shape(), w.shape(), g);
    return p;
  }

  std::shared_ptr<const ConvPrimitive> build(const KernelContext& ctx, const Tensor& x,
                                             const Tensor& w, bool has_bias) const {
    auto p = std::make_shared<ConvPrimitive>();
    std::vector<int64_t> in(x.shape().begin() + 2, x.shape().end());
    std::vector<int64_t> kernel(w.shape().begin() + 2, w.shape().end());
    WindowGeometry g = attrs_.resolve(ctx.node(), in, kernel);
    const int64_t n = x.dim(0), m = w.dim(0);
    p->out_shape = {n, m};
    for (int64_t o : g.out) p->out_shape.push_back(o);
    if (shape_numel(p->out_shape) == 0) {
      p->usable = true;
      return p;
    }
    const memory::data_type type = onednn::data_type_of(x.dtype());
    auto any = [type](const Shape& s) {
      return memory::desc(onednn::to_dims(s), type, memory::format_tag::any);
    };
    onednn::build_conv_primitive(*p, any(x.shape()), any(p->out_shape), w.shape(), group_, has_bias,
                                 g);
    return p;
  }

  std::unique_ptr<OpKernel> reference_;
  WindowAttrs attrs_;
  int64_t group_ = 1;
  onednn::ShapeCache<ConvPrimitive> cache_;
  onednn::ShapeCache<ConvPrimitive> cache_16bit_;  // apart: shape keys do not name dtypes
  onednn::PackedWeights weights_;
  onednn::ShapeCache<onednn::ConvBackwardWeightsPrimitive> backward_weights_cache_;
};

class ConvTransposeOnednnKernel : public OpKernel {
 public:
  explicit ConvTransposeOnednnKernel(const KernelInfo& info)
      : reference_(onednn::make_float32_reference(info)),
        weights_(info.constant_inputs.count(1) > 0) {
    attrs_.parse(info.node);
    group_ = info.node.attr_int("group", 1);
    output_padding_ = info.node.attr_ints("output_padding", {});
    output_shape_ = info.node.attr_ints("output_shape", {});
  }

  void compute(KernelContext& ctx) const override {
    const DType dtype = ctx.input(0).dtype();
    if (is_16bit_float(dtype)) return run_in_float32(*this, ctx, dtype);
    if (!conv_inputs_ok(ctx)) return reference_->compute(ctx);
    const Tensor& x = ctx.input(0);
    const Tensor& w = ctx.input(1);
    const Tensor* b = ctx.optional_input(2);
    const int64_t c = x.dim(1), m = w.dim(1) * group_;
    if (group_ <= 0 || w.dim(0) != c || c % group_ != 0 || (b && b->dim(0) != m))
      return reference_->compute(ctx);
    std::vector<int64_t> kernel(w.shape().begin() + 2, w.shape().end());
    if (!attrs_.kernel_shape.empty() && attrs_.kernel_shape != kernel)
      return reference_->compute(ctx);
    auto p = cache_.get(onednn::shape_key({&x.shape(), &w.shape(), b ? &b->shape() : nullptr}),
                        [&] { return build(ctx, x, w, b != nullptr); });
    if (!p->usable) return reference_->compute(ctx);
    execute_conv(ctx, *p, x, w, b, weights_);
  }

 private:
  std::shared_ptr<const ConvPrimitive> build(const KernelContext& ctx, const Tensor& x,
                                             const Tensor& w, bool has_bias) const {
    auto p = std::make_shared<ConvPrimitive>();
    std::vector<int64_t> in(x.shape().begin() + 2, x.shape().end());
    std::vector<int64_t> kernel(w.shape().begin() + 2, w.shape().end());
    WindowGeometry g =
        attrs_.resolve_transpose(ctx.node(), in, kernel, output_padding_, output_shape_);
    const int64_t n = x.dim(0), c = x.dim(1), m = w.dim(1) * group_;
    p->out_shape = {n, m};
    for (int64_t o : g.out) p->out_shape.push_back(o);
    if (shape_numel(p->out_shape) == 0) {
      p->usable = true;
      return p;
    }
    // oneDNN wants [g, M/g, C/g, k...]; ONNX stores [C, M/g, k...] = [g, C/g, M/g, k...].
    const int64_t cg = c / group_, mg = m / group_;
    const size_t nd = kernel.size();
    int64_t ksize = 1;
    for (int64_t k : kernel) ksize *= k;
    memory::dims dims, strides;
    if (group_ > 1) {
      dims.push_back(group_);
      strides.push_back(cg * mg * ksize);
    }
    dims.push_back(mg);
    strides.push_back(ksize);
    dims.push_back(cg);
    strides.push_back(mg * ksize);
    memory::dims kstrides = onednn::dense_strides(kernel);
    for (size_t i = 0; i < nd; ++i) {
      dims.push_back(kernel[i]);
      strides.push_back(kstrides[i]);
    }
    p->user_weights_md = memory::desc(dims, memory::data_type::f32, strides);
    // The end padding oneDNN sees absorbs output_padding and any zero extension.
    memory::dims pad_r(nd);
    for (size_t i = 0; i < nd; ++i)
      pad_r[i] = (in[i] - 1) * g.strides[i] + (kernel[i] - 1) * g.dilations[i] + 1 -
                 g.pads_begin[i] - g.out[i];
    try {
      if (g.out.size() != nd) throw dnnl::error(dnnl_invalid_arguments, "rank");
      auto any = [](const memory::dims& s) {
        return memory::desc(s, memory::data_type::f32, memory::format_tag::any);
      };
      memory::desc bias_md = has_bias ? onednn::plain_desc({m}) : memory::desc();
      dnnl::deconvolution_forward::desc desc(
          dnnl::prop_kind::forward_inference, dnnl::algorithm::deconvolution_direct,
          any(onednn::to_dims(x.shape())), any(dims), bias_md, any(onednn::to_dims(p->out_shape)),
          onednn::to_dims(g.strides), sub1(g.dilations), onednn::to_dims(g.pads_begin), pad_r);
      dnnl::deconvolution_forward::primitive_desc pd(desc, onednn::concurrent_attr(),
                                                     onednn::cpu_engine());
      p->scratchpad_md = pd.scratchpad_desc();
      p->src_md = pd.src_desc();
      p->weights_md = pd.weights_desc();
      p->dst_md = pd.dst_desc();
      p->prim = dnnl::deconvolution_forward(pd);
      p->usable = true;
    } catch (const dnnl::error&) {
      p->usable = false;
    }
    return p;
  }

  std::unique_ptr<OpKernel> reference_;
  WindowAttrs attrs_;
  int64_t group_ = 1;
  std::vector<int64_t> output_padding_, output_shape_;
  onednn::ShapeCache<ConvPrimitive> cache_;
  onednn::PackedWeights weights_;
};

DPRUN_REGISTER_KERNEL({.op_type = "Conv",
                       .since = 1,
                       .dtypes = {DType::Float32, DType::BFloat16, DType::Float16},
                       .priority = 10,
                       .impl = "onednn",
                       .factory = make_kernel<ConvOnednnKernel>});
DPRUN_REGISTER_KERNEL({.op_type = "ConvTranspose",
                       .since = 1,
                       .dtypes = {DType::Float32, DType::BFloat16, DType::Float16},
                       .priority = 10,
                       .impl = "onednn",
                       .factory = make_kernel<ConvTransposeOnednnKernel>});

}  // namespace
}  // namespace dprun
