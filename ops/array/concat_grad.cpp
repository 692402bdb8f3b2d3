// Concat: each input's gradient is its slice of dY along the concatenation axis. Offsets are
// constants when every input's size on the axis is known, else computed from Shape at run time.
#include "ops/grad/grad_util.h"

namespace dprun {
namespace {

void concat_grad(GradientContext& ctx) {
  int64_t axis = ctx.node().attr_int("axis", 1);  // opset 1 defaulted to 1
  if (auto rank = ctx.rank_of(ctx.I(0))) axis = normalize_axis(axis, *rank);
  size_t n = ctx.input_count();
  std::vector<int64_t> sizes;
  for (size_t i = 0; i < n; ++i) {
    auto t = ctx.type_of(ctx.I(i));
    if (!t || !t->shape || axis < 0 || static_cast<size_t>(axis) >= t->shape->size() ||
        !(*t->shape)[static_cast<size_t>(axis)].is_known())
      break;
    sizes.push_back((*t->shape)[static_cast<size_t>(axis)].value);
  }
  bool static_sizes = sizes.size() == n;
  if (ctx.onnx_opset() < 10) {
    if (!static_sizes) ctx.fail("the inputs' sizes along axis ", axis, " are unknown");
    int64_t offset = 0;
    for (size_t i = 0; i < n; ++i) {
      if (ctx.wants_GI(i))
        ctx.set_GI(i, ctx.emit("Slice", {ctx.GO(0)},
                               {{"starts", Attribute::of_ints({offset})},
                                {"ends", Attribute::of_ints({offset + sizes[i]})},
                                {"axes", Attribute::of_ints({axis})}}));
      offset += sizes[i];
    }
    return;
  }
  std::string axes = ctx.ints({axis});
  if (static_sizes) {
    int64_t offset = 0;
    for (size_t i = 0; i < n; ++i) {
      if (ctx.wants_GI(i))
        ctx.set_GI(i, ctx.emit("Slice", {ctx.GO(0), ctx.ints({offset}),
                                         ctx.ints({offset + sizes[i]}), axes}));
      offset += sizes[i];
    }
    return;
  }
  std::string offset = ctx.ints({0});
  for (size_t i = 0; i < n; ++i) {
    std::string size = ctx.emit("Gather", {ctx.emit("Shape", {ctx.I(i)}), axes});
    std::string end = ctx.emit("Add", {offset, size});
    if (ctx.wants_GI(i)) ctx.set_GI(i, ctx.emit("Slice", {ctx.GO(0), offset, end, axes}));
    offset = end;
  }
}

DPRUN_REGISTER_GRADIENT({.op_type = "Concat", .since = 1, .rule = concat_grad});

}  // namespace
}  // namespace dprun
