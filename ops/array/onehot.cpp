// OneHot: inserts a depth axis; the entry equal to the index holds values[1], all others
// values[0]. Negative indices count from depth; indices outside [-depth, depth) select nothing.
#include <cmath>

#include "engine/op_facts.h"
#include "ops/common/data_movement.h"

namespace dprun {
namespace {

/// Every element of a numeric tensor as int64 (floating values truncate toward zero).
std::vector<int64_t> as_int64(const Tensor& t, const KernelContext& ctx, const char* what) {
  if (t.dtype() == DType::Bool) ctx.fail(what, " must be numeric, got ", t.describe());
  std::vector<int64_t> out(static_cast<size_t>(t.numel()));
  for (size_t i = 0; i < out.size(); ++i) {
    const double v = t.item_as_double(static_cast<int64_t>(i));
    if (!std::isfinite(v)) ctx.fail(what, " holds a non-finite value");
    out[i] = static_cast<int64_t>(v);
  }
  return out;
}

class OneHotKernel : public OpKernel {
 public:
  explicit OneHotKernel(const KernelInfo& info) : axis_(info.node.attr_int("axis", -1)) {}
  void compute(KernelContext& ctx) const override {
    const Tensor& indices = ctx.input(0);
    const Tensor& depth_t = ctx.input(1);
    const Tensor& values = ctx.input(2);
    if (depth_t.numel() != 1) ctx.fail("depth must be a scalar, got ", depth_t.describe());
    const int64_t depth = as_int64(depth_t, ctx, "depth")[0];
    if (depth <= 0) ctx.fail("depth must be positive, got ", depth);
    if (values.numel() != 2) ctx.fail("values must hold [off, on], got ", values.describe());
    const int64_t r = indices.rank();
    const int64_t axis = axis_ < 0 ? axis_ + r + 1 : axis_;
    if (axis < 0 || axis > r) ctx.fail("axis ", axis_, " is out of range for output rank ", r + 1);
    Shape out_shape = indices.shape();
    out_shape.insert(out_shape.begin() + axis, depth);
    int64_t outer = 1;
    for (int64_t d = 0; d < axis; ++d) outer *= indices.shape()[static_cast<size_t>(d)];
    const int64_t inner = outer == 0 ? 0 : indices.numel() / std::max<int64_t>(outer, 1);
    const std::vector<int64_t> idx = as_int64(indices, ctx, "indices");
    Tensor& y = ctx.allocate_output(0, out_shape, values.dtype());
    visit_element_size(dtype_size(values.dtype()), [&](auto zero) {
      using U = decltype(zero);
      const U off = static_cast<const U*>(values.raw_data())[0];
      const U on = static_cast<const U*>(values.raw_data())[1];
      U* out = static_cast<U*>(y.raw_data());
      std::fill(out, out + y.numel(), off);
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t i = 0; i < inner; ++i) {
          int64_t v = idx[static_cast<size_t>(o * inner + i)];
          if (v < 0) v += depth;
          if (v >= 0 && v < depth) out[(o * depth + v) * inner + i] = on;
        }
    });
  }

 private:
  int64_t axis_;
};

DPRUN_REGISTER_KERNEL({.op_type = "OneHot", .since = 9, .factory = make_kernel<OneHotKernel>});

}  // namespace
}  // namespace dprun

// The ops' facts (engine/op_facts.h): output types, shapes, 16-bit and layout policy.
namespace dprun {
namespace {
DPRUN_REGISTER_OP_FACTS({.op_type = "OneHot", .dtype = OutputDTypeRule::same_as_input(2)});

}  // namespace
}  // namespace dprun
