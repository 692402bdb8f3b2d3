// Range: start, start + delta, ... up to (excluding) limit (arguments in ops/array/range.h).
#include "ops/array/range.h"
#include "engine/op_facts.h"

namespace dprun {
namespace {

class RangeKernel : public OpKernel {
 public:
  explicit RangeKernel(const KernelInfo& info) : params_(info) {}
  void compute(KernelContext& ctx) const override {
    const DType dtype = params_.dtype(ctx);
    visit_numeric_dtype(dtype, [&](auto zero) {
      using T = decltype(zero);
      const RangeArgs<T> a = params_.args<T>(ctx);
      Tensor& y = ctx.allocate_output(0, {a.length}, dtype);
      T* out = y.data<T>();
      for (int64_t i = 0; i < a.length; ++i) out[i] = range_element(a.start, a.delta, i);
    });
  }

 private:
  RangeParams params_;
};

DPRUN_REGISTER_KERNEL({.op_type = "Range", .since = 11, .factory = make_kernel<RangeKernel>});

}  // namespace
}  // namespace dprun

// The ops' facts (engine/op_facts.h): output types, shapes, 16-bit and layout policy.
namespace dprun {
namespace {
// Kept in float32: positions: integers above 2048 are not all float16 values.
DPRUN_REGISTER_OP_FACTS({.op_type = "Range", .float32_only = true});

}  // namespace
}  // namespace dprun
