// DepthToSpace and SpaceToDepth are permutations of X's elements, so each gradient is the
// inverse permutation of dY with the same blocksize. In the ONNX spec SpaceToDepth views X as
// [N, C, H/b, b, W/b, b] and moves the two block axes in front of C: output channel
// (i * b + j) * C + c. DepthToSpace in DCR mode reads channel (i * b + j) * C' + c: exactly
// SpaceToDepth's layout, so DCR and SpaceToDepth undo each other. CRD mode reads channel
// c * b * b + i * b + j, which no single op writes: its gradient takes the reshapes back by
// hand, from dY [N, C', H*b, W*b] to the view [N, C', b, b, H, W], with each split done by a
// Reshape that copies the leading dims (0) and infers one (-1), so no size is needed at
// build time.
#include "ops/grad/grad_util.h"

namespace dprun {
namespace {

std::string transpose(GradientContext& ctx, const std::string& x, std::vector<int64_t> perm) {
  return ctx.emit("Transpose", {x}, {{"perm", Attribute::of_ints(perm)}});
}

// dX of a CRD DepthToSpace: dY[n, c, h*b + i, w*b + j] goes to dX[n, c*b*b + i*b + j, h, w].
std::string crd_inverse(GradientContext& ctx, int64_t b) {
  if (ctx.onnx_opset() < 5) ctx.fail("CRD mode needs ai.onnx opset >= 5 for Reshape");
  std::string split_w = ctx.emit("Reshape", {ctx.GO(0), ctx.ints({0, 0, 0, -1, b})});  // n c y w j
  std::string y_last = transpose(ctx, split_w, {0, 1, 4, 3, 2});                       // n c j w y
  std::string split_h =
      ctx.emit("Reshape", {y_last, ctx.ints({0, 0, 0, 0, -1, b})});  // n c j w h i
  std::string blocks = transpose(ctx, split_h, {0, 1, 5, 2, 4, 3});  // n c i j h w
  return ctx.reshape_like(blocks, ctx.I(0));
}

void depth_to_space_grad(GradientContext& ctx) {
  const int64_t b = ctx.node().attr_int("blocksize");
  const std::string mode = ctx.node().attr_string("mode", "DCR");
  if (mode == "CRD") return ctx.set_GI(0, crd_inverse(ctx, b));
  if (mode != "DCR") ctx.fail("mode must be DCR or CRD, got '", mode, "'");
  ctx.set_GI(0, ctx.emit("SpaceToDepth", {ctx.GO(0)}, {{"blocksize", Attribute::of_int(b)}}));
}

void space_to_depth_grad(GradientContext& ctx) {
  // DepthToSpace's default mode is DCR at every opset (the attribute exists from 11 on).
  const int64_t b = ctx.node().attr_int("blocksize");
  ctx.set_GI(0, ctx.emit("DepthToSpace", {ctx.GO(0)}, {{"blocksize", Attribute::of_int(b)}}));
}

DPRUN_REGISTER_GRADIENT({.op_type = "DepthToSpace", .since = 1, .rule = depth_to_space_grad});
DPRUN_REGISTER_GRADIENT({.op_type = "SpaceToDepth", .since = 1, .rule = space_to_depth_grad});

}  // namespace
}  // namespace dprun
