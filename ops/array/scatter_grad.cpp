// ScatterElements and ScatterND: Y is data with updates written at the indexed positions.
//   reduction "none": d(data) = dY with the written positions zeroed (the same scatter of zeros
//     into dY); d(updates) = the gather of dY at the indices (GatherElements / GatherND), kept
//     only for the update that is written last where indices repeat (the kernels apply updates
//     in index order, so the last one wins and the others reach nothing).
//   reduction "add": Y = data + the sum of the updates at each position, so d(data) = dY and
//     d(updates) = the gather of dY at the indices, for every update.
// mul, max and min are refused: their gradients depend on the other updates' values.
//
// The last writer is found without a float comparison: scatter each update's flat position
// (an int64 Range) into a tensor of -1 shaped like data, gather it back at the indices, and
// compare with the update's own position.
#include "ops/grad/grad_util.h"

namespace dprun {
namespace {

struct ScatterForm {
  const char* scatter;                     // ScatterElements or ScatterND
  const char* gather;                      // GatherElements or GatherND
  std::map<std::string, Attribute> attrs;  // axis for the Elements form
};

ScatterForm scatter_form(GradientContext& ctx) {
  if (ctx.node().op_type == "ScatterND") return {"ScatterND", "GatherND", {}};
  return {"ScatterElements",
          "GatherElements",
          {{"axis", Attribute::of_int(ctx.node().attr_int("axis", 0))}}};
}

// 1 (of the data's dtype) for each update that is written last at its position, 0 for the
// updates a later one overwrites.
std::string last_writer(GradientContext& ctx, const ScatterForm& f) {
  const std::string& updates = ctx.I(2);
  std::string count = ctx.emit("Size", {updates});
  std::string flat =
      ctx.emit("Range", {ctx.scalar(0, DType::Int64), count, ctx.scalar(1, DType::Int64)});
  std::string own = ctx.emit("Reshape", {flat, ctx.emit("Shape", {updates})});
  Tensor minus_one = Tensor::from_vector<int64_t>({1}, {-1});
  std::string unset = ctx.emit("ConstantOfShape", {ctx.emit("Shape", {ctx.I(0)})},
                               {{"value", Attribute::of_tensor(minus_one)}});
  std::string written = ctx.emit(f.scatter, {unset, ctx.I(1), own}, f.attrs);
  std::string winner = ctx.emit("Equal", {ctx.emit(f.gather, {written, ctx.I(1)}, f.attrs), own});
  return ctx.cast(winner, ctx.dtype_of(ctx.I(0)));
}

void scatter_grad(GradientContext& ctx) {
  std::string reduction = ctx.node().attr_string("reduction", "none");
  if (reduction != "none" && reduction != "add")
    ctx.fail("reduction '", reduction, "' is not supported (only none and add)");
  bool add = reduction == "add";
  ScatterForm f = scatter_form(ctx);
  const std::string& dy = ctx.GO(0);
  if (ctx.wants_GI(0)) {
    if (add)
      ctx.set_GI(0, ctx.emit("Identity", {dy}));
    else
      ctx.set_GI(0, ctx.emit(f.scatter, {dy, ctx.I(1), grad::zeros_like(ctx, ctx.I(2))}, f.attrs));
  }
  if (ctx.wants_GI(2)) {
    std::string picked = ctx.emit(f.gather, {dy, ctx.I(1)}, f.attrs);
    ctx.set_GI(2, add ? picked : ctx.emit("Mul", {picked, last_writer(ctx, f)}));
  }
}

DPRUN_REGISTER_GRADIENT({.op_type = "ScatterElements", .since = 11, .rule = scatter_grad});
DPRUN_REGISTER_GRADIENT({.op_type = "ScatterND", .since = 11, .rule = scatter_grad});

}  // namespace
}  // namespace dprun
