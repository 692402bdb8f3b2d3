// Shape and Size: metadata of the input as int64 tensors.
#include "ops/array/shape_ops.h"

#include <algorithm>

#include "engine/autograd/shape_rules.h"
#include "engine/op_facts.h"

namespace dprun {
namespace {

class ShapeKernel : public OpKernel {
 public:
  explicit ShapeKernel(const KernelInfo& info) : params_(info) {}
  void compute(KernelContext& ctx) const override {
    const std::vector<int64_t> dims = params_.listed(ctx.input(0).shape());
    Tensor& y = ctx.allocate_output(0, {static_cast<int64_t>(dims.size())}, DType::Int64);
    std::copy(dims.begin(), dims.end(), y.data<int64_t>());
  }

 private:
  ShapeParams params_;
};

class SizeKernel : public OpKernel {
 public:
  explicit SizeKernel(const KernelInfo&) {}
  void compute(KernelContext& ctx) const override {
    Tensor& y = ctx.allocate_output(0, {}, DType::Int64);
    *y.data<int64_t>() = ctx.input(0).numel();
  }
};

DPRUN_REGISTER_KERNEL(
    {.op_type = "Shape", .since = 1, .metadata_inputs = {0}, .factory = make_kernel<ShapeKernel>});
DPRUN_REGISTER_KERNEL(
    {.op_type = "Size", .since = 1, .metadata_inputs = {0}, .factory = make_kernel<SizeKernel>});

}  // namespace
}  // namespace dprun

// The ops' facts (engine/op_facts.h): output types, shapes, 16-bit and layout policy.
namespace dprun {
namespace {

// 1-D whatever the input; its length is the input's rank within [start, end).
std::optional<SymbolicShape> shape_shape(const ShapeQuery& q) {
  if (q.output != 0) return std::nullopt;
  auto x = q.input(0);
  if (!x) return SymbolicShape(1);
  int64_t rank = static_cast<int64_t>(x->size());
  auto clamp = [&](int64_t v) { return std::clamp(v < 0 ? v + rank : v, int64_t{0}, rank); };
  int64_t start = clamp(q.node.attr_int("start", 0));
  int64_t end = clamp(q.node.attr_int("end", rank));
  return SymbolicShape{Dim::known(std::max<int64_t>(end - start, 0))};
}

std::optional<SymbolicShape> size_shape(const ShapeQuery& q) {
  return q.output == 0 ? std::optional<SymbolicShape>(SymbolicShape{}) : std::nullopt;
}

DPRUN_REGISTER_OP_FACTS({.op_type = "Shape",
                         .dtype = OutputDTypeRule::fixed(DType::Int64),
                         .shape_rule = shape_shape});
DPRUN_REGISTER_OP_FACTS({.op_type = "Size",
                         .dtype = OutputDTypeRule::fixed(DType::Int64),
                         .shape_rule = size_shape});

}  // namespace
}  // namespace dprun
