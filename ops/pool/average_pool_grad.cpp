// AveragePool: every element of a window receives the window's dY divided by the count the
// forward divided by (the window's positions inside X, or inside the padded extent with
// count_include_pad=1; with ceil_mode the last window may be cut short). So dY is divided by
// those counts (a build-time constant) and spread back with a ConvTranspose of a kernel of
// ones, run on [N * C, 1, out...] so that N and C may be unknown. The ConvTranspose pads crop
// it to X's spatial size, and output_padding extends it where the windows stop short of X's
// end. Needs static spatial sizes of X.
#include "ops/common/conv_util.h"
#include "ops/grad/grad_util.h"

namespace dprun {
namespace {

// The number of positions the window at output `o` averages along one axis.
int64_t window_count(const WindowGeometry& g, size_t axis, int64_t o, bool include_pad) {
  const int64_t lo = include_pad ? -g.pads_begin[axis] : 0;
  const int64_t hi = include_pad ? g.in[axis] + g.pads_end[axis] : g.in[axis];
  int64_t count = 0;
  for (int64_t k = 0; k < g.kernel[axis]; ++k) {
    int64_t pos = o * g.strides[axis] - g.pads_begin[axis] + k * g.dilations[axis];
    count += pos >= lo && pos < hi ? 1 : 0;
  }
  return count;
}

// The divisor of every output position, shaped [out...] (row-major over the spatial axes).
Tensor window_counts(const WindowGeometry& g, bool include_pad) {
  std::vector<double> counts = {1.0};
  for (size_t axis = 0; axis < g.rank(); ++axis) {
    std::vector<double> next;
    for (double c : counts)
      for (int64_t o = 0; o < g.out[axis]; ++o)
        next.push_back(c * static_cast<double>(window_count(g, axis, o, include_pad)));
    counts = std::move(next);
  }
  // A window with nothing to average outputs 0: its elements get nothing back either.
  for (double& c : counts) c = c > 0 ? c : 1.0;
  return Tensor::from_vector<double>(Shape(g.out.begin(), g.out.end()), counts);
}

// A float64 constant in X's element type.
std::string constant_like_x(GradientContext& ctx, const Tensor& t) {
  DType dt = ctx.dtype_of(ctx.I(0));
  std::string c = ctx.constant(t);
  return dt == DType::Float64 ? c : ctx.cast(c, dt);
}

// ConvTranspose pads and output_padding that give back X's spatial size.
void transpose_padding(const WindowGeometry& g, std::vector<int64_t>& pads,
                       std::vector<int64_t>& output_padding) {
  size_t nd = g.rank();
  pads.assign(2 * nd, 0);
  output_padding.assign(nd, 0);
  for (size_t i = 0; i < nd; ++i) {
    int64_t full = (g.out[i] - 1) * g.strides[i] + (g.kernel[i] - 1) * g.dilations[i] + 1;
    int64_t crop_end = full - g.pads_begin[i] - g.in[i];
    pads[i] = g.pads_begin[i];
    pads[i + nd] = crop_end > 0 ? crop_end : 0;
    output_padding[i] = crop_end < 0 ? -crop_end : 0;
  }
}

void average_pool_grad(GradientContext& ctx) {
  const Node& node = ctx.node();
  auto in = grad::static_dims(ctx, ctx.I(0), 2);
  if (!in) ctx.fail("needs X's static spatial shape");
  WindowAttrs attrs;
  attrs.parse(node);
  if (attrs.kernel_shape.empty()) ctx.fail("kernel_shape is required");
  WindowGeometry g = attrs.resolve(node, *in, attrs.kernel_shape);
  bool include_pad = node.attr_int("count_include_pad", 0) != 0;

  std::string dy =
      ctx.emit("Div", {ctx.GO(0), constant_like_x(ctx, window_counts(g, include_pad))});
  std::vector<int64_t> planes = {-1, 1};
  planes.insert(planes.end(), g.out.begin(), g.out.end());
  dy = ctx.emit("Reshape", {dy, ctx.ints(planes)});
  Shape kernel = {1, 1};
  kernel.insert(kernel.end(), g.kernel.begin(), g.kernel.end());
  std::string ones = constant_like_x(
      ctx, Tensor::from_vector<double>(kernel, std::vector<double>(shape_numel(kernel), 1.0)));
  std::vector<int64_t> pads, output_padding;
  transpose_padding(g, pads, output_padding);
  std::string dx = ctx.emit("ConvTranspose", {dy, ones},
                            {{"strides", Attribute::of_ints(g.strides)},
                             {"dilations", Attribute::of_ints(g.dilations)},
                             {"pads", Attribute::of_ints(pads)},
                             {"output_padding", Attribute::of_ints(output_padding)}});
  ctx.set_GI(0, ctx.reshape_like(dx, ctx.I(0)));
}

DPRUN_REGISTER_GRADIENT({.op_type = "AveragePool", .since = 1, .rule = average_pool_grad});

}  // namespace
}  // namespace dprun
