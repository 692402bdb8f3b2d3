// GlobalMaxPool: dY flows to the maximum of each plane, split equally between tied maxima (as
// PyTorch's amax). X == Y is written as !(X < Y): Equal takes floats only from opset 11.
#include "ops/grad/grad_util.h"

namespace dprun {
namespace {

void global_max_pool_grad(GradientContext& ctx) {
  const std::string& x = ctx.I(0);
  int64_t rank = ctx.require_rank(x);
  std::vector<int64_t> spatial;
  for (int64_t a = 2; a < rank; ++a) spatial.push_back(a);
  std::string is_max = ctx.emit("Not", {ctx.emit("Less", {x, ctx.O(0)})});
  std::string mask = ctx.cast(is_max, ctx.dtype_of(x));
  std::string share = ctx.emit("Div", {mask, ctx.reduce_sum(mask, spatial, true)});
  ctx.set_GI(0, ctx.emit("Mul", {ctx.GO(0), share}));
}

DPRUN_REGISTER_GRADIENT({.op_type = "GlobalMaxPool", .since = 1, .rule = global_max_pool_grad});

}  // namespace
}  // namespace dprun
