// oneDNN fast paths for MaxPool (without Indices) and AveragePool over 1-D to 3-D windows, in
// float32, bfloat16 and float16: a 16-bit pooling oneDNN has no primitive for on this CPU
// (float16 without AVX512_FP16) runs the float32 path over a widened copy. Primitives are
// cached per input shape.
#include <vector>

#include "engine/kernel.h"
#include "ops/common/conv_util.h"
#include "ops/cpu/onednn_util.h"
#include "ops/cpu/run_in_float32.h"
#include "ops/pool/pool_primitive.h"

namespace dprun {
namespace {

using dnnl::memory;

using onednn::PoolPrimitive;

class PoolOnednnKernel : public OpKernel {
 public:
  PoolOnednnKernel(const KernelInfo& info, bool is_max)
      : reference_(onednn::make_float32_reference(info)), is_max_(is_max) {
    attrs_.parse(info.node);
    if (attrs_.kernel_shape.empty()) info.node.fail("kernel_shape is required");
    count_include_pad_ = !is_max && info.node.attr_int("count_include_pad", 0) != 0;
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    const bool half = is_16bit_float(x.dtype());
    // The float32 path: the reference, or for 16 bits the float32 kernel over a widened copy.
    const auto fall_back = [&] {
      return half ? run_in_float32(*this, ctx, x.dtype()) : reference_->compute(ctx);
    };
    if ((x.dtype() != DType::Float32 && !half) || x.rank() < 3 || x.rank() > 5 ||
        static_cast<size_t>(x.rank() - 2) != attrs_.kernel_shape.size() ||
        (ctx.output_count() > 1 && ctx.output_wanted(1)))
      return fall_back();
    const onednn::ShapeCache<PoolPrimitive>& cache = half ? cache_16bit_ : cache_;
    auto p = cache.get(onednn::shape_key({&x.shape()}), [&] { return build(ctx, x); });
    if (!p->usable) return fall_back();
    Tensor& y = ctx.allocate_output(0, p->out_shape, x.dtype());
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
    const dnnl::memory::data_type type = onednn::data_type_of(x.dtype());
    onednn::build_pool_primitive(*p, onednn::plain_desc(x.shape(), type),
                                 onednn::plain_desc(p->out_shape, type), in, g, is_max_,
                                 count_include_pad_);
    return p;
  }

  std::unique_ptr<OpKernel> reference_;
  bool is_max_;
  bool count_include_pad_ = false;
  WindowAttrs attrs_;
  onednn::ShapeCache<PoolPrimitive> cache_;
  onednn::ShapeCache<PoolPrimitive> cache_16bit_;  // apart: shape keys do not name dtypes
};

std::unique_ptr<OpKernel> make_max_pool(const KernelInfo& info) {
  // The Indices output is only produced by the reference kernel, which takes no 16-bit input:
  // a 16-bit MaxPool with Indices runs it on a widened copy (PoolOnednnKernel::compute).
  const bool half = !info.input_types.empty() && info.input_types[0] &&
                    is_16bit_float(info.input_types[0]->dtype);
  if (info.node.outputs.size() > 1 && !info.node.outputs[1].empty() && !half) return nullptr;
  return std::make_unique<PoolOnednnKernel>(info, true);
}
std::unique_ptr<OpKernel> make_average_pool(const KernelInfo& info) {
  return std::make_unique<PoolOnednnKernel>(info, false);
}

DPRUN_REGISTER_KERNEL({.op_type = "MaxPool",
                       .since = 1,
                       .dtypes = {DType::Float32, DType::BFloat16, DType::Float16},
                       .priority = 10,
                       .impl = "onednn",
                       .factory = make_max_pool});
DPRUN_REGISTER_KERNEL({.op_type = "AveragePool",
                       .since = 1,
                       .dtypes = {DType::Float32, DType::BFloat16, DType::Float16},
                       .priority = 10,
                       .impl = "onednn",
                       .factory = make_average_pool});

}  // namespace
}  // namespace dprun
