// GatherElements: Y[p] = X[p with p[axis] replaced by I[p]], so dX sums dY[p] into each position
// an index names; repeated indices accumulate, negative ones count from the end.
//
// From opset 16: one ScatterElements with reduction "add" into zeros shaped like X.
// Opsets 11-15 (ScatterElements cannot add there): a OneHot of the indices along a new axis
// after `axis`, [.., P, D, ..] with D = X.shape[axis], times dY, summed over the P indices
// gives [.., D, ..]; Pad then grows the other axes, which I may hold shorter than X, to X's
// shape with zeros. The one-hot holds P * D elements per slice, fine for the gradients of
// small gathers (torch.gather on logits, attention indices).
#include "ops/grad/grad_util.h"

namespace dprun {
namespace {

std::string scatter_add(GradientContext& ctx, int64_t axis) {
  return ctx.emit("ScatterElements", {grad::zeros_like(ctx, ctx.I(0)), ctx.I(1), ctx.GO(0)},
                  {{"axis", Attribute::of_int(axis)}, {"reduction", Attribute::of_string("add")}});
}

std::string one_hot_sum(GradientContext& ctx, int64_t axis) {
  const std::string& x = ctx.I(0);
  int64_t rank = ctx.require_rank(x);
  axis = normalize_axis(axis, rank);
  DType dtype = ctx.dtype_of(x);
  std::string x_dims = ctx.emit("Shape", {x});
  std::string depth = ctx.emit("Gather", {x_dims, ctx.ints({axis})});
  Tensor off_on = Tensor::from_vector<double>({2}, {0, 1});
  std::string values = ctx.cast(ctx.constant(off_on), dtype);
  std::string hot = ctx.emit("OneHot", {ctx.I(1), depth, values},
                             {{"axis", Attribute::of_int(axis + 1)}});  // [.., P, D, ..]
  std::string picked = ctx.emit("Mul", {hot, ctx.unsqueeze(ctx.GO(0), {axis + 1})});
  std::string sums = ctx.reduce_sum(picked, {axis}, false);  // [.., D, ..]
  std::string short_by = ctx.emit("Sub", {x_dims, ctx.emit("Shape", {sums})});
  std::string pads =
      ctx.emit("Concat", {ctx.ints(std::vector<int64_t>(static_cast<size_t>(rank), 0)), short_by},
               {{"axis", Attribute::of_int(0)}});
  return ctx.emit("Pad", {sums, pads});
}

void gather_elements_grad(GradientContext& ctx) {
  int64_t axis = ctx.node().attr_int("axis", 0);
  ctx.set_GI(0, ctx.onnx_opset() >= 16 ? scatter_add(ctx, axis) : one_hot_sum(ctx, axis));
}

DPRUN_REGISTER_GRADIENT({.op_type = "GatherElements", .since = 11, .rule = gather_elements_grad});

}  // namespace
}  // namespace dprun
