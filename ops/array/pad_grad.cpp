// Pad, constant mode: dX = dY with the padding taken off again, a Pad by the negated pads
// (negative pads crop; forward crops come back as zeros). The pads are attributes before
// opset 11 (`paddings` at opset 1) and an input after, with optional axes from opset 18. The
// padding value, an input from opset 11, receives the sum of dY over the padding.
#include "ops/grad/grad_util.h"

namespace dprun {
namespace {

std::string unpad(GradientContext& ctx) {
  const Node& node = ctx.node();
  if (ctx.opset() < 11) {
    const char* key = node.has_attr("pads") ? "pads" : "paddings";
    std::vector<int64_t> pads = node.attr_ints(key);
    for (int64_t& p : pads) p = -p;
    return ctx.emit("Pad", {ctx.GO(0)}, {{key, Attribute::of_ints(pads)}});
  }
  std::string pads;
  if (auto c = ctx.constant_value(ctx.I(1))) {
    std::vector<int64_t> v;
    for (int64_t i = 0; i < c->numel(); ++i)
      v.push_back(-static_cast<int64_t>(c->item_as_double(i)));
    pads = ctx.ints(v);
  } else {
    pads = ctx.emit("Neg", {ctx.I(1)});
  }
  std::vector<std::string> inputs = {ctx.GO(0), pads};
  if (ctx.input_count() > 3 && !ctx.I(3).empty()) inputs.insert(inputs.end(), {"", ctx.I(3)});
  return ctx.emit("Pad", inputs);
}

void pad_grad(GradientContext& ctx) {
  std::string mode = ctx.node().attr_string("mode", "constant");
  if (mode != "constant") ctx.fail("mode '", mode, "' is not supported (only 'constant')");
  std::string dx = unpad(ctx);
  ctx.set_GI(0, dx);
  if (ctx.opset() >= 11 && ctx.input_count() > 2 && !ctx.I(2).empty() && ctx.wants_GI(2)) {
    std::string padding = ctx.emit("Sub", {grad::sum_all(ctx, ctx.GO(0)), grad::sum_all(ctx, dx)});
    ctx.set_GI(2, ctx.reshape_like(padding, ctx.I(2)));
  }
}

DPRUN_REGISTER_GRADIENT({.op_type = "Pad", .since = 1, .rule = pad_grad});

}  // namespace
}  // namespace dprun
