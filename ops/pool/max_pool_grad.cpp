// MaxPool: each window's dY flows to the element it selected. The selections are the Indices
// output (flat positions in X, row-major: the node's own output when it has one with
// storage_order 0, else that of a second MaxPool emitted with the same attributes), and dY is
// scattered into zeros shaped like X flattened.
//
// Overlapping windows (ResNet's 3x3 stride 2) can select the same element, whose gradient is
// then the sum. From opset 16 ScatterElements sums repeated indices (reduction="add"). Before,
// the output grid is split into ceil(extent / stride) phase groups per spatial axis: windows of
// one group never overlap, so their indices are unique and a plain ScatterElements (Scatter at
// opsets 9 and 10) is exact; the groups' results are summed.
// Ties inside a window go to the element the forward kernel selects (the first).
#include <climits>

#include "ops/common/conv_util.h"
#include "ops/grad/grad_util.h"

namespace dprun {
namespace {

// The flat argmax positions of every window.
std::string argmax_indices(GradientContext& ctx) {
  const Node& node = ctx.node();
  if (ctx.output_count() > 1 && !ctx.O(1).empty() && node.attr_int("storage_order", 0) == 0)
    return ctx.O(1);
  std::map<std::string, Attribute> attrs = node.attributes;
  attrs.erase("storage_order");
  return ctx.emit_n("MaxPool", {ctx.I(0)}, 2, attrs)[1];
}

std::string flat(GradientContext& ctx, const std::string& v) {
  return ctx.emit("Reshape", {v, ctx.ints({-1})});
}

// Zeros of X's size, flattened.
std::string flat_zeros(GradientContext& ctx) {
  Tensor zero = Tensor::zeros({1}, ctx.dtype_of(ctx.I(0)));
  std::string size = ctx.emit("Reshape", {ctx.emit("Size", {ctx.I(0)}), ctx.ints({1})});
  return ctx.emit("ConstantOfShape", {size}, {{"value", Attribute::of_tensor(zero)}});
}

// Scatters `updates` at `indices` (both shaped like Y) into `zeros`, summing repeated indices
// when `add`.
std::string scatter(GradientContext& ctx, const std::string& zeros, const std::string& indices,
                    const std::string& updates, bool add) {
  std::map<std::string, Attribute> attrs = {{"axis", Attribute::of_int(0)}};
  if (add) {
    Attribute reduction;
    reduction.kind = Attribute::Kind::String;
    reduction.s = "add";
    attrs["reduction"] = reduction;
  }
  const char* op = ctx.onnx_opset() >= 11 ? "ScatterElements" : "Scatter";
  return ctx.emit(op, {zeros, flat(ctx, indices), flat(ctx, updates)}, attrs);
}

/// The number of phase groups along each spatial axis: windows `groups` outputs apart are at
/// least their extent apart.
std::vector<int64_t> phase_groups(GradientContext& ctx) {
  const Node& node = ctx.node();
  std::vector<int64_t> kernel = node.attr_ints("kernel_shape");
  size_t nd = kernel.size();
  std::vector<int64_t> strides = node.attr_ints("strides", std::vector<int64_t>(nd, 1));
  std::vector<int64_t> dilations = node.attr_ints("dilations", std::vector<int64_t>(nd, 1));
  if (strides.size() != nd || dilations.size() != nd)
    ctx.fail("strides and dilations must have one value per spatial axis");
  std::vector<int64_t> groups(nd);
  for (size_t i = 0; i < nd; ++i) {
    int64_t extent = (kernel[i] - 1) * dilations[i] + 1;
    groups[i] = (extent + strides[i] - 1) / strides[i];
  }
  return groups;
}

/// The output sizes of the pooling, from X's static shape.
std::vector<int64_t> output_sizes(GradientContext& ctx) {
  auto in = grad::static_dims(ctx, ctx.I(0), 2);
  if (!in) ctx.fail("at opset ", ctx.onnx_opset(), " the gradient needs X's static spatial shape");
  WindowAttrs attrs;
  attrs.parse(ctx.node());
  return attrs.resolve(ctx.node(), *in, attrs.kernel_shape).out;
}

// The outputs of `t` ([N, C, out...]) at positions phase[i] + k * groups[i] on each spatial
// axis; nullopt when some axis has no such position (`out`, the output sizes, is only needed
// before opset 10).
std::optional<std::string> select_phase(GradientContext& ctx, const std::string& t,
                                        const std::vector<int64_t>& phase,
                                        const std::vector<int64_t>& groups,
                                        const std::vector<int64_t>& out) {
  std::vector<int64_t> axes, starts, ends, steps;
  for (size_t i = 0; i < groups.size(); ++i) {
    if (groups[i] == 1) continue;
    axes.push_back(static_cast<int64_t>(i) + 2);
    starts.push_back(phase[i]);
    ends.push_back(INT64_MAX);
    steps.push_back(groups[i]);
  }
  if (axes.empty()) return t;
  if (ctx.onnx_opset() >= 10)
    return ctx.emit("Slice",
                    {t, ctx.ints(starts), ctx.ints(ends), ctx.ints(axes), ctx.ints(steps)});
  // Slice has no steps before opset 10: gather the positions along each axis.
  std::string r = t;
  for (size_t i = 0; i < groups.size(); ++i) {
    if (groups[i] == 1) continue;
    std::vector<int64_t> positions;
    for (int64_t p = phase[i]; p < out[i]; p += groups[i]) positions.push_back(p);
    if (positions.empty()) return std::nullopt;
    r = ctx.emit("Gather", {r, ctx.ints(positions)},
                 {{"axis", Attribute::of_int(static_cast<int64_t>(i) + 2)}});
  }
  return r;
}

// Advances `phase` to the next phase vector (the last axis fastest); false after the last.
bool next_phase(std::vector<int64_t>& phase, const std::vector<int64_t>& groups) {
  for (size_t a = phase.size(); a-- > 0;) {
    if (++phase[a] < groups[a]) return true;
    phase[a] = 0;
  }
  return false;
}

// Sums the scatters of every phase group.
std::string scatter_by_phase(GradientContext& ctx, const std::string& zeros,
                             const std::string& indices) {
  std::vector<int64_t> groups = phase_groups(ctx);
  std::vector<int64_t> out = ctx.onnx_opset() >= 10 ? std::vector<int64_t>{} : output_sizes(ctx);
  std::vector<int64_t> phase(groups.size(), 0);
  std::vector<std::string> parts;
  do {
    auto g = select_phase(ctx, ctx.GO(0), phase, groups, out);
    if (g)
      parts.push_back(
          scatter(ctx, zeros, *select_phase(ctx, indices, phase, groups, out), *g, false));
  } while (next_phase(phase, groups));
  return parts.size() == 1 ? parts[0] : ctx.emit("Sum", parts);
}

void max_pool_grad(GradientContext& ctx) {
  if (ctx.onnx_opset() < 9)
    ctx.fail("needs ai.onnx opset >= 9 (Scatter), the graph imports ", ctx.onnx_opset());
  std::string indices = argmax_indices(ctx);
  std::string zeros = flat_zeros(ctx);
  std::string dx = ctx.onnx_opset() >= 16 ? scatter(ctx, zeros, indices, ctx.GO(0), true)
                                          : scatter_by_phase(ctx, zeros, indices);
  ctx.set_GI(0, ctx.reshape_like(dx, ctx.I(0)));
}

DPRUN_REGISTER_GRADIENT({.op_type = "MaxPool", .since = 1, .rule = max_pool_grad});

}  // namespace
}  // namespace dprun
