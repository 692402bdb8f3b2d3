// Split: dX is the outputs' gradients concatenated back along the axis, with zeros for the
// outputs no gradient reached. However the sizes were given (attribute, input, num_outputs),
// the outputs' own shapes tell them.
#include "ops/grad/grad_util.h"

namespace dprun {
namespace {

void split_grad(GradientContext& ctx) {
  std::vector<std::string> parts;
  for (size_t i = 0; i < ctx.output_count(); ++i)
    parts.push_back(ctx.has_GO(i) ? ctx.GO(i) : grad::zeros_like(ctx, ctx.O(i)));
  int64_t axis = ctx.node().attr_int("axis", 0);
  ctx.set_GI(0, ctx.emit("Concat", parts, {{"axis", Attribute::of_int(axis)}}));
}

DPRUN_REGISTER_GRADIENT({.op_type = "Split", .since = 1, .rule = split_grad});

}  // namespace
}  // namespace dprun
