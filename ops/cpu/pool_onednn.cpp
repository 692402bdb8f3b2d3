// oneDNN fast paths for float32 MaxPool (without Indices) and AveragePool over 1-D to 3-D
// windows. Primitives are cached per input shape.
#include <vector>

#include "engine/kernel.h"
#include "ops/cpu/conv_util.h"
#include "ops/cpu/onednn_util.h"

namespace dprun {
namespace {

using dnnl::memory;

struct PoolPrimitive {
  bool usable = false;
  dnnl::pooling_v2_forward prim;
  memory::desc src_md, dst_md, scratchpad_md;
  Shape out_shape;
};

class PoolOnednnKernel : public OpKernel {
 public:
  PoolOnednnKernel(const KernelInfo& info, bool is_max)
      : reference_(onednn::make_reference(info)), is_max_(is_max) {
    attrs_.parse(info.node);
    if (attrs_.kernel_shape.empty()) info.node.fail("kernel_shape is required");
    count_include_pad_ = !is_max && info.node.attr_int("count_include_pad", 0) != 0;
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    if (x.dtype() != DType::Float32 || x.rank() < 3 || x.rank() > 5 ||
        static_cast<size_t>(x.rank() - 2) != attrs_.kernel_shape.size() ||
        (ctx.output_count() > 1 && ctx.output_wanted(1)))
      return reference_->compute(ctx);
    auto p = cache_.get(onednn::shape_key({&x.shape()}), [&] { return build(ctx, x); });
    if (!p->usable) return reference_->compute(ctx);
    Tensor& y = ctx.allocate_output(0, p->out_shape, DType::Float32);
    if (y.numel() == 0) return;
    onednn::execute(p->prim, p->scratchpad_md,
                    {{DNNL_ARG_SRC, onednn::wrap(p->src_md, x.raw_data())},
                     {DNNL_ARG_DST, onednn::wrap(p->dst_md, y.raw_data())}});
  }

 private:
  std::shared_ptr<const PoolPrimitive> build(const KernelContext& ctx, const Tensor& x) const {
    auto p = std::make_shared<PoolPrimitive>();
    std::vector<int64_t> in(x.shape().begin() + 2, x.shape().end());
    WindowGeometry g = attrs_.resolve(ctx.node(), in, attrs_.kernel_shape);
    p->out_shape = {x.dim(0), x.dim(1)};
    for (int64_t o : g.out) p->out_shape.push_back(o);
    if (shape_numel(p->out_shape) == 0) return p;  // the reference handles empty outputs
    const size_t nd = g.rank();
    memory::dims pad_r(nd), dil(nd);
    for (size_t i = 0; i < nd; ++i) {
      const int64_t ext = (g.kernel[i] - 1) * g.dilations[i] + 1;
      // oneDNN derives the output size from the padding: the end padding absorbs ceil_mode.
      pad_r[i] = (g.out[i] - 1) * g.strides[i] + ext - in[i] - g.pads_begin[i];
      dil[i] = g.dilations[i] - 1;
      // Windows hanging past the declared end padding would be counted as padding by oneDNN.
      if (count_include_pad_ && pad_r[i] > g.pads_end[i]) return p;
      if (!is_max_ && g.dilations[i] != 1) return p;
    }
    try {
      p->src_md = onednn::plain_desc(x.shape());
      p->dst_md = onednn::plain_desc(p->out_shape);
      auto alg = is_max_              ? dnnl::algorithm::pooling_max
                 : count_include_pad_ ? dnnl::algorithm::pooling_avg_include_padding
                                      : dnnl::algorithm::pooling_avg_exclude_padding;
      dnnl::pooling_v2_forward::desc desc(
          dnnl::prop_kind::forward_inference, alg, p->src_md, p->dst_md, onednn::to_dims(g.strides),
          onednn::to_dims(g.kernel), dil, onednn::to_dims(g.pads_begin), pad_r);
      dnnl::pooling_v2_forward::primitive_desc pd(desc, onednn::concurrent_attr(),
                                                  onednn::cpu_engine());
      p->scratchpad_md = pd.scratchpad_desc();
      p->prim = dnnl::pooling_v2_forward(pd);
      p->usable = true;
    } catch (const dnnl::error&) {
      p->usable = false;
    }
    return p;
  }

  std::unique_ptr<OpKernel> reference_;
  bool is_max_;
  bool count_include_pad_ = false;
  WindowAttrs attrs_;
  onednn::ShapeCache<PoolPrimitive> cache_;
};

std::unique_ptr<OpKernel> make_max_pool(const KernelInfo& info) {
  // The Indices output is only produced by the reference kernel.
  if (info.node.outputs.size() > 1 && !info.node.outputs[1].empty()) return nullptr;
  return std::make_unique<PoolOnednnKernel>(info, true);
}
std::unique_ptr<OpKernel> make_average_pool(const KernelInfo& info) {
  return std::make_unique<PoolOnednnKernel>(info, false);
}

DPRUN_REGISTER_KERNEL({.op_type = "MaxPool",
                       .since = 1,
                       .dtypes = {DType::Float32},
                       .priority = 10,
                       .impl = "onednn",
                       .factory = make_max_pool});
DPRUN_REGISTER_KERNEL({.op_type = "AveragePool",
                       .since = 1,
                       .dtypes = {DType::Float32},
                       .priority = 10,
                       .impl = "onednn",
                       .factory = make_average_pool});

}  // namespace
}  // namespace dprun
