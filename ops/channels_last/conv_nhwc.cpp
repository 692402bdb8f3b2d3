// Channels-last Conv and pooling (domain "dprun"), introduced by the layout rewrite
// (engine/backends/cpu/layout_rewrite.h). Input 0 and output 0 are NHWC tensors ([N, H, W, C]);
// weights and bias keep the ONNX layout. The oneDNN paths read and write NHWC directly, with no
// reorder of activations; every other case runs the plain op's reference kernel between
// transposes, so all dtypes and attributes the plain op accepts still work.
#include <algorithm>
#include <cmath>
#include <map>
#include <vector>

#include "engine/kernel.h"
#include "engine/rewrites/rewrite_domain.h"
#include "ops/channels_last/batch_norm_affine.h"
#include "ops/common/conv_util.h"
#include "ops/conv/conv_primitive.h"
#include "ops/cpu/data_movement.h"
#include "ops/cpu/fused_activation.h"
#include "ops/cpu/onednn_util.h"
#include "ops/cpu/packed_weights.h"
#include "ops/cpu/plain_reference.h"
#include "ops/cpu/simd_loops.h"
#include "ops/pool/pool_primitive.h"

namespace dprun {
namespace {

using dnnl::memory;
using onednn::nhwc_desc;

const std::vector<int64_t> kToNchw = {0, 3, 1, 2};
const std::vector<int64_t> kToNhwc = {0, 2, 3, 1};

/// The plain op's reference kernel, run on transposed copies of input 0 and output 0.
class NhwcReferenceKernel : public OpKernel {
 public:
  NhwcReferenceKernel(const KernelInfo& info, const std::string& plain_op)
      : kernel_(plain_reference(info, node_, plain_op, info.node.inputs.size(),
                                /*input0_type_known=*/false)),
        activation_(info.node) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    if (x.rank() != 4) ctx.fail("expects a 4-D NHWC input, got ", x.describe());
    const size_t esize = dtype_size(x.dtype());
    Tensor xn = Tensor::empty({x.dim(0), x.dim(3), x.dim(1), x.dim(2)}, x.dtype(), ctx.device());
    permute_copy(ctx.execution(), x.raw_data(), x.shape(), kToNchw, xn.raw_data(), esize);
    std::vector<const Tensor*> inputs(ctx.input_count(), nullptr);
    inputs[0] = &xn;
    for (size_t i = 1; i < inputs.size(); ++i) inputs[i] = ctx.optional_input(i);
    std::vector<Tensor> outputs(node_.outputs.size());
    KernelContext inner(node_, ctx.execution(), inputs, outputs);
    kernel_->compute(inner);
    const Tensor& y = outputs.at(0);
    if (!y.defined() || y.rank() != 4) ctx.fail("the reference kernel gave no 4-D output");
    Tensor& out = ctx.allocate_output(0, {y.dim(0), y.dim(2), y.dim(3), y.dim(1)}, y.dtype());
    permute_copy(ctx.execution(), y.raw_data(), y.shape(), kToNhwc, out.raw_data(),
                 dtype_size(y.dtype()));
    activation_.apply(out);
  }

 private:
  Node node_;  // the plain op, which kernel_ runs
  std::unique_ptr<OpKernel> kernel_;
  FusedActivation activation_;
};

std::unique_ptr<OpKernel> make_nhwc_reference_kernel(const KernelInfo& info, const char* plain) {
  return std::make_unique<NhwcReferenceKernel>(info, plain);
}

template <const char* Plain>
std::unique_ptr<OpKernel> make_nhwc_reference(const KernelInfo& info) {
  return make_nhwc_reference_kernel(info, Plain);
}

/// The convolution of one set of shapes (out_shape is NHWC). With `blocked`, oneDNN's Winograd
/// convolution, which reads and writes its own blocked layout (src_md, dst_md): `to_blocked`
/// reorders the NHWC input (nhwc_src_md) into it and `from_blocked` the output back.
struct ConvNhwcPrimitive : onednn::ConvPrimitive {
  bool blocked = false;
  dnnl::primitive to_blocked, from_blocked;
  memory::desc to_blocked_scratchpad_md, from_blocked_scratchpad_md;
  memory::desc nhwc_src_md, nhwc_dst_md;
};

/// This thread's buffer for one of a blocked convolution's activations (slot 0: input, 1:
/// output).
float* blocked_buffer(int slot, size_t bytes) {
  return onednn::aligned_thread_buffer<ConvNhwcPrimitive>(
      slot, (bytes + sizeof(float) - 1) / sizeof(float));
}

class ConvNhwcKernel : public OpKernel {
 public:
  explicit ConvNhwcKernel(const KernelInfo& info)
      : reference_(onednn::make_reference(info)),
        activation_(info.node),
        weights_(info.constant_inputs.count(1) > 0),
        allow_winograd_(info.plan_options.allow_winograd) {
    attrs_.parse(info.node);
    group_ = info.node.attr_int("group", 1);
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    const Tensor& w = ctx.input(1);
    const Tensor* b = ctx.optional_input(2);
    if (x.dtype() != DType::Float32 || w.dtype() != DType::Float32 || x.rank() != 4 ||
        w.rank() != 4 || (b && (b->dtype() != DType::Float32 || b->rank() != 1)))
      return reference_->compute(ctx);
    const int64_t c = x.dim(3), m = w.dim(0);
    if (group_ <= 0 || c != w.dim(1) * group_ || m % group_ != 0 || (b && b->dim(0) != m))
      return reference_->compute(ctx);  // reports the error
    std::vector<int64_t> kernel(w.shape().begin() + 2, w.shape().end());
    if (!attrs_.kernel_shape.empty() && attrs_.kernel_shape != kernel)
      return reference_->compute(ctx);
    onednn::run_sized(ctx, onednn::nhwc_conv_multiply_adds(x, w, attrs_.strides),
                      [&] { run(ctx, x, w, b); });
  }

 private:
  /// The oneDNN path, on the threads run_sized gives it.
  void run(KernelContext& ctx, const Tensor& x, const Tensor& w, const Tensor* b) const {
    auto p = cache_.get(onednn::shape_key({&x.shape(), &w.shape(), b ? &b->shape() : nullptr}),
                        [&] { return build(ctx, x, w, b != nullptr); });
    if (!p->usable) return reference_->compute(ctx);
    using namespace onednn;
    Tensor& y = ctx.allocate_output(0, p->out_shape, DType::Float32);
    const void* src_data = x.raw_data();
    void* dst_data = y.raw_data();
    if (p->blocked) {
      src_data = blocked_buffer(0, p->src_md.get_size());
      dst_data = blocked_buffer(1, p->dst_md.get_size());
      execute_reusing(
          p->to_blocked, p->to_blocked_scratchpad_md,
          {{DNNL_ARG_FROM, &p->nhwc_src_md, x.raw_data()}, {DNNL_ARG_TO, &p->src_md, src_data}});
    }
    const MemoryArg src{DNNL_ARG_SRC, &p->src_md, src_data};
    const MemoryArg weights{DNNL_ARG_WEIGHTS, nullptr, nullptr,
                            weights_.get(ctx, w, p->user_weights_md, p->weights_md)};
    const MemoryArg dst{DNNL_ARG_DST, &p->dst_md, dst_data};
    if (b)
      execute_reusing(p->prim, p->scratchpad_md,
                      {src, weights, dst, {DNNL_ARG_BIAS, &p->bias_md, b->raw_data()}});
    else
      execute_reusing(p->prim, p->scratchpad_md, {src, weights, dst});
    if (p->blocked)
      execute_reusing(
          p->from_blocked, p->from_blocked_scratchpad_md,
          {{DNNL_ARG_FROM, &p->dst_md, dst_data}, {DNNL_ARG_TO, &p->nhwc_dst_md, y.raw_data()}});
    activation_.apply_after_onednn(ctx, y);
  }

  std::shared_ptr<const ConvNhwcPrimitive> build(const KernelContext& ctx, const Tensor& x,
                                                 const Tensor& w, bool has_bias) const {
    auto p = std::make_shared<ConvNhwcPrimitive>();
    const int64_t n = x.dim(0), h = x.dim(1), wd = x.dim(2), c = x.dim(3), m = w.dim(0);
    std::vector<int64_t> kernel(w.shape().begin() + 2, w.shape().end());
    WindowGeometry g = attrs_.resolve(ctx.node(), {h, wd}, kernel);
    p->out_shape = {n, g.out[0], g.out[1], m};
    if (shape_numel(p->out_shape) == 0) return p;  // the reference handles empty outputs
    dnnl::primitive_attr attr = onednn::concurrent_attr();
    attr.set_post_ops(activation_.post_ops());
    p->nhwc_src_md = nhwc_desc(n, c, h, wd);
    p->nhwc_dst_md = nhwc_desc(n, m, g.out[0], g.out[1]);
    if (winograd_applies(g, c, m)) build_blocked_winograd(*p, w.shape(), has_bias, g, attr);
    if (!p->usable)
      onednn::build_conv_primitive(*p, p->nhwc_src_md, p->nhwc_dst_md, w.shape(), group_, has_bias,
                                   g, attr);
    return p;
  }

  /// Whether --allow-winograd asks for Winograd, the window is the 3x3, stride-1, undilated,
  /// ungrouped one it computes, and the convolution is large enough to gain from it: with its
  /// reorders to and from NHWC, one thread, batch 8, Winograd took 0.51-0.85x the direct time
  /// from 7M multiply-adds per image up (16 to 64 channels at 55 x 55, 64 to 64 at 28 x 28, 48 to
  /// 192 at 13 x 13), 1.05x at 1.8M (128 to 32 at 7 x 7) and 1.36x at 0.9M (8 to 16 at 28 x 28).
  bool winograd_applies(const WindowGeometry& g, int64_t in_channels, int64_t out_channels) const {
    constexpr int64_t kMinMultiplyAddsPerImage = 4'000'000;
    const std::vector<int64_t> three = {3, 3}, one = {1, 1};
    return allow_winograd_ && group_ == 1 && g.kernel == three && g.strides == one &&
           g.dilations == one &&
           in_channels * out_channels * 9 * g.out[0] * g.out[1] >= kMinMultiplyAddsPerImage;
  }

  /// oneDNN's Winograd convolution in the blocked layout it picks, with the reorders from and
  /// to NHWC; leaves p.usable false where this CPU or oneDNN has no Winograd for the shape.
  static void build_blocked_winograd(ConvNhwcPrimitive& p, const Shape& weights, bool has_bias,
                                     const WindowGeometry& g, const dnnl::primitive_attr& attr) {
    auto any = [](const memory::desc& d) {
      return memory::desc(d.dims(), memory::data_type::f32, memory::format_tag::any);
    };
    onednn::build_conv_primitive(p, any(p.nhwc_src_md), any(p.nhwc_dst_md), weights, 1, has_bias, g,
                                 attr, dnnl::algorithm::convolution_winograd);
    if (!p.usable) return;
    try {
      const dnnl::engine& e = onednn::cpu_engine();
      const dnnl::primitive_attr concurrent = onednn::concurrent_attr();
      dnnl::reorder::primitive_desc in(e, p.nhwc_src_md, e, p.src_md, concurrent);
      dnnl::reorder::primitive_desc out(e, p.dst_md, e, p.nhwc_dst_md, concurrent);
      p.to_blocked = dnnl::reorder(in);
      p.to_blocked_scratchpad_md = in.scratchpad_desc();
      p.from_blocked = dnnl::reorder(out);
      p.from_blocked_scratchpad_md = out.scratchpad_desc();
      p.blocked = true;
    } catch (const dnnl::error&) {
      p.usable = false;
    }
  }

  std::unique_ptr<OpKernel> reference_;
  WindowAttrs attrs_;
  int64_t group_ = 1;
  FusedActivation activation_;
  onednn::ShapeCache<ConvNhwcPrimitive> cache_;
  onednn::PackedWeights weights_;
  bool allow_winograd_;
};

using onednn::PoolPrimitive;

class PoolNhwcKernel : public OpKernel {
 public:
  PoolNhwcKernel(const KernelInfo& info, bool is_max)
      : reference_(onednn::make_reference(info)), is_max_(is_max) {
    attrs_.parse(info.node);
    count_include_pad_ = !is_max && info.node.attr_int("count_include_pad", 0) != 0;
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    if (x.dtype() != DType::Float32 || x.rank() != 4 || attrs_.kernel_shape.size() != 2 ||
        (ctx.output_count() > 1 && ctx.output_wanted(1)))
      return reference_->compute(ctx);
    auto p = cache_.get(onednn::shape_key({&x.shape()}), [&] { return build(ctx, x); });
    if (!p->usable) return reference_->compute(ctx);
    Tensor& y = ctx.allocate_output(0, p->out_shape, DType::Float32);
    onednn::execute_reusing(
        p->prim, p->scratchpad_md,
        {{DNNL_ARG_SRC, &p->src_md, x.raw_data()}, {DNNL_ARG_DST, &p->dst_md, y.raw_data()}});
  }

 private:
  std::shared_ptr<const PoolPrimitive> build(const KernelContext& ctx, const Tensor& x) const {
    auto p = std::make_shared<PoolPrimitive>();
    const int64_t n = x.dim(0), h = x.dim(1), wd = x.dim(2), c = x.dim(3);
    std::vector<int64_t> in = {h, wd};
    WindowGeometry g = attrs_.resolve(ctx.node(), in, attrs_.kernel_shape);
    p->out_shape = {n, g.out[0], g.out[1], c};
    if (shape_numel(p->out_shape) == 0) return p;  // the reference handles empty outputs
    onednn::build_pool_primitive(*p, nhwc_desc(n, c, h, wd), nhwc_desc(n, c, g.out[0], g.out[1]),
                                 in, g, is_max_, count_include_pad_);
    return p;
  }

  std::unique_ptr<OpKernel> reference_;
  bool is_max_;
  bool count_include_pad_ = false;
  WindowAttrs attrs_;
  onednn::ShapeCache<PoolPrimitive> cache_;
};

/// Mean over H and W of an NHWC tensor. Each task sums a fixed block of pixel rows of one image
/// (all channels, so memory is read front to back) into its own partial sums, and the partials
/// are added in block order: the result depends on neither the thread count nor the batch.
class GlobalAveragePoolNhwcKernel : public OpKernel {
 public:
  explicit GlobalAveragePoolNhwcKernel(const KernelInfo& info)
      : reference_(onednn::make_reference(info)) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    if (x.rank() != 4 || (x.dtype() != DType::Float32 && x.dtype() != DType::Float64) ||
        x.dim(1) * x.dim(2) == 0)
      return reference_->compute(ctx);
    const int64_t n = x.dim(0), hw = x.dim(1) * x.dim(2), c = x.dim(3);
    Tensor& y = ctx.allocate_output(0, {n, 1, 1, c}, x.dtype());
    constexpr int64_t kRows = 256;
    const int64_t blocks = (hw + kRows - 1) / kRows;
    std::vector<double> partial(static_cast<size_t>(n * blocks * c), 0.0);
    visit_dtype_among<float, double>(x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const T* src = x.data<T>();
      T* dst = y.data<T>();
      ctx.parallel_for(n * blocks, 1, [&](int64_t b, int64_t e) {
        for (int64_t task = b; task < e; ++task) {
          const int64_t i = task / blocks, first = (task % blocks) * kRows;
          simd::sum_rows(src + (i * hw + first) * c, std::min(kRows, hw - first), c, c,
                         partial.data() + task * c);
        }
      });
      for (int64_t i = 0; i < n; ++i)
        for (int64_t k = 0; k < c; ++k) {
          double sum = 0;
          for (int64_t j = 0; j < blocks; ++j) sum += partial[(i * blocks + j) * c + k];
          dst[i * c + k] = static_cast<T>(sum / static_cast<double>(hw));
        }
    });
  }

 private:
  std::unique_ptr<OpKernel> reference_;
};

/// Inference BatchNormalization on NHWC data: y = x * a[c] + b[c] with
/// a = scale / sqrt(var + epsilon) and b = B - mean * a, channels innermost.
class BatchNormNhwcKernel : public OpKernel {
 public:
  explicit BatchNormNhwcKernel(const KernelInfo& info)
      : reference_(make_nhwc_reference_kernel(info, "BatchNormalization")),
        epsilon_(info.node.attr_float("epsilon", 1e-5f)),
        activation_(info.node) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    if (x.rank() != 4) return reference_->compute(ctx);
    const int64_t c = x.dim(3);
    for (size_t k = 1; k < 5; ++k)
      if (!ctx.has_input(k) || ctx.input(k).dtype() != x.dtype() || ctx.input(k).numel() != c)
        return reference_->compute(ctx);  // reports the error
    visit_dtype_among<float, double>(x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      std::vector<T> a, b;
      batch_norm_affine(ctx, 1, c, epsilon_, a, b);
      Tensor& y = ctx.allocate_output_reusing(0, 0, x.shape(), x.dtype());
      const T* src = x.data<T>();
      T* dst = y.data<T>();
      ctx.parallel_for(x.numel() / std::max<int64_t>(c, 1),
                       std::max<int64_t>(1, 4096 / std::max<int64_t>(c, 1)),
                       [&](int64_t begin, int64_t end) {
                         for (int64_t r = begin; r < end; ++r) {
                           simd::affine(src + r * c, a.data(), b.data(), dst + r * c, c);
                           activation_.apply(dst + r * c, c);  // while the row is in cache
                         }
                       });
    });
  }

 private:
  std::unique_ptr<OpKernel> reference_;
  float epsilon_;
  FusedActivation activation_;
};

std::unique_ptr<OpKernel> make_max_pool(const KernelInfo& info) {
  // The Indices output is only produced by the reference kernel.
  if (info.node.outputs.size() > 1 && !info.node.outputs[1].empty()) return nullptr;
  return std::make_unique<PoolNhwcKernel>(info, true);
}
std::unique_ptr<OpKernel> make_average_pool(const KernelInfo& info) {
  return std::make_unique<PoolNhwcKernel>(info, false);
}

constexpr char kConv[] = "Conv";
constexpr char kMaxPool[] = "MaxPool";
constexpr char kAveragePool[] = "AveragePool";
constexpr char kGlobalAveragePool[] = "GlobalAveragePool";
constexpr char kBatchNormalization[] = "BatchNormalization";

DPRUN_REGISTER_KERNEL({.domain = kRewriteDomain,
                       .op_type = "ConvNHWC",
                       .factory = make_nhwc_reference<kConv>});
DPRUN_REGISTER_KERNEL({.domain = kRewriteDomain,
                       .op_type = "MaxPoolNHWC",
                       .factory = make_nhwc_reference<kMaxPool>});
DPRUN_REGISTER_KERNEL({.domain = kRewriteDomain,
                       .op_type = "AveragePoolNHWC",
                       .factory = make_nhwc_reference<kAveragePool>});
DPRUN_REGISTER_KERNEL({.domain = kRewriteDomain,
                       .op_type = "GlobalAveragePoolNHWC",
                       .factory = make_nhwc_reference<kGlobalAveragePool>});
DPRUN_REGISTER_KERNEL({.domain = kRewriteDomain,
                       .op_type = "BatchNormalizationNHWC",
                       .factory = make_nhwc_reference<kBatchNormalization>});
DPRUN_REGISTER_KERNEL({.domain = kRewriteDomain,
                       .op_type = "BatchNormalizationNHWC",
                       .dtypes = kFloatTypes,
                       .priority = 10,
                       .impl = "direct",
                       .factory = make_kernel<BatchNormNhwcKernel>});
DPRUN_REGISTER_KERNEL({.domain = kRewriteDomain,
                       .op_type = "ConvNHWC",
                       .dtypes = {DType::Float32},
                       .priority = 10,
                       .impl = "onednn",
                       .factory = make_kernel<ConvNhwcKernel>});
DPRUN_REGISTER_KERNEL({.domain = kRewriteDomain,
                       .op_type = "MaxPoolNHWC",
                       .dtypes = {DType::Float32},
                       .priority = 10,
                       .impl = "onednn",
                       .factory = make_max_pool});
DPRUN_REGISTER_KERNEL({.domain = kRewriteDomain,
                       .op_type = "AveragePoolNHWC",
                       .dtypes = {DType::Float32},
                       .priority = 10,
                       .impl = "onednn",
                       .factory = make_average_pool});
DPRUN_REGISTER_KERNEL({.domain = kRewriteDomain,
                       .op_type = "GlobalAveragePoolNHWC",
                       .dtypes = kFloatTypes,
                       .priority = 10,
                       .impl = "direct",
                       .factory = make_kernel<GlobalAveragePoolNhwcKernel>});

}  // namespace
}  // namespace dprun
