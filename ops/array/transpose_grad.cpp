// Transpose: dX = dY transposed by the inverse permutation.
#include "ops/grad/grad_util.h"

namespace dprun {
namespace {

void transpose_grad(GradientContext& ctx) {
  if (!ctx.node().has_attr("perm")) {  // the default reverses the axes: its own inverse
    ctx.set_GI(0, ctx.emit("Transpose", {ctx.GO(0)}));
    return;
  }
  std::vector<int64_t> perm = ctx.node().attr_ints("perm");
  std::vector<int64_t> inverse(perm.size(), -1);
  for (size_t i = 0; i < perm.size(); ++i) {
    int64_t p = normalize_axis(perm[i], static_cast<int64_t>(perm.size()));
    inverse[static_cast<size_t>(p)] = static_cast<int64_t>(i);
  }
  ctx.set_GI(0, ctx.emit("Transpose", {ctx.GO(0)}, {{"perm", Attribute::of_ints(inverse)}}));
}

DPRUN_REGISTER_GRADIENT({.op_type = "Transpose", .since = 1, .rule = transpose_grad});

}  // namespace
}  // namespace dprun
