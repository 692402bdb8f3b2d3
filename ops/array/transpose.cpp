// Transpose: a permuted copy, moved by element size so every dtype shares one path.
#include "engine/autograd/shape_rules.h"
#include "engine/op_facts.h"
#include "ops/cpu/data_movement.h"

namespace dprun {
namespace {

class TransposeKernel : public OpKernel {
 public:
  explicit TransposeKernel(const KernelInfo& info) {
    if (info.node.has_attr("perm")) perm_ = info.node.attr_ints("perm");
  }
  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    const std::vector<int64_t> perm = transpose_perm(perm_, static_cast<size_t>(x.rank()), ctx);
    Shape out_shape;
    for (int64_t p : perm) out_shape.push_back(x.shape()[static_cast<size_t>(p)]);
    Tensor& y = ctx.allocate_output(0, out_shape, x.dtype());
    permute_copy(ctx.execution(), x.raw_data(), x.shape(), perm, y.raw_data(),
                 dtype_size(x.dtype()));
  }

 private:
  std::vector<int64_t> perm_;
};

DPRUN_REGISTER_KERNEL({.op_type = "Transpose",
                       .since = 1,
                       .factory = make_kernel<TransposeKernel>});

}  // namespace
}  // namespace dprun

// The ops' facts (engine/op_facts.h): output types, shapes, 16-bit and layout policy.
namespace dprun {
namespace {

// Input 0's dims in `perm`'s order (reversed without it).
std::optional<SymbolicShape> transpose_shape(const ShapeQuery& q) {
  if (q.output != 0) return std::nullopt;
  auto x = q.input(0);
  if (!x) return std::nullopt;
  std::vector<int64_t> perm = q.node.attr_ints("perm", {});
  if (perm.empty())
    for (size_t i = x->size(); i-- > 0;) perm.push_back(static_cast<int64_t>(i));
  if (perm.size() != x->size()) return std::nullopt;
  SymbolicShape out;
  for (int64_t p : perm) {
    if (p < 0 || p >= static_cast<int64_t>(x->size())) return std::nullopt;
    out.push_back((*x)[static_cast<size_t>(p)]);
  }
  return out;
}

DPRUN_REGISTER_OP_FACTS({.op_type = "Transpose",
                         .shape_rule = transpose_shape,
                         .keeps_values = true});

}  // namespace
}  // namespace dprun
