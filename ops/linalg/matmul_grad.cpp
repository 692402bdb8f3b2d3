// MatMul (numpy semantics): dA = dY @ B^T, dB = A^T @ dY over the last two axes, summed back
// over broadcast batch axes. 1-D operands are promoted to matrices as the forward op does.
// A 2-D B under a batched A (a linear layer over [batch, tokens, features]) gets its gradient
// as one product of A's and dY's rows, A_rows^T @ dY_rows, as PyTorch computes it, instead of a
// product per batch entry summed afterwards (a [batch, K, N] intermediate).
#include <algorithm>
#include <map>
#include <optional>
#include <string>

#include "engine/autograd/shape_propagation.h"
#include "ops/grad/grad_util.h"

namespace dprun {
namespace {

std::string transpose_last_two(GradientContext& ctx, const std::string& x, int64_t rank) {
  std::vector<int64_t> perm;
  for (int64_t i = 0; i < rank; ++i) perm.push_back(i);
  std::swap(perm[static_cast<size_t>(rank - 1)], perm[static_cast<size_t>(rank - 2)]);
  return ctx.emit("Transpose", {x}, {{"perm", Attribute::of_ints(perm)}});
}

/// dB of a 2-D B under a batched A [..., M, K]: Flatten(A)^T @ Flatten(dY), [K, N], one product
/// over every row of every batch entry (a Gemm with transA from opset 11; a Transpose before).
std::string weight_grad_over_rows(GradientContext& ctx, const std::string& a, const std::string& g,
                                  int64_t rank) {
  const std::map<std::string, Attribute> last_axis = {{"axis", Attribute::of_int(rank - 1)}};
  const std::string a_rows = ctx.emit("Flatten", {a}, last_axis);
  const std::string g_rows = ctx.emit("Flatten", {g}, last_axis);
  if (ctx.onnx_opset() >= 11)
    return ctx.emit("Gemm", {a_rows, g_rows}, {{"transA", Attribute::of_int(1)}});
  return ctx.emit("MatMul", {transpose_last_two(ctx, a_rows, 2), g_rows});
}

std::optional<SymbolicShape> shape_of(GradientContext& ctx, const std::string& v) {
  auto t = ctx.type_of(v);
  if (!t || !t->shape) return std::nullopt;
  return t->shape;
}

void matmul_grad(GradientContext& ctx) {
  const std::string &a = ctx.I(0), &b = ctx.I(1), &go = ctx.GO(0);
  int64_t ra = ctx.require_rank(a), rb = ctx.require_rank(b);
  if (ra == 1 && rb == 1) {  // dot product: Y is a scalar
    if (ctx.wants_GI(0)) ctx.set_GI(0, ctx.emit("Mul", {go, b}));
    if (ctx.wants_GI(1)) ctx.set_GI(1, ctx.emit("Mul", {go, a}));
    return;
  }
  // Promote to matrices: A [K] -> [1, K], B [K] -> [K, 1]; dY gains the matching unit axis.
  int64_t rank_o = std::max(ra, rb) - (ra == 1 || rb == 1 ? 1 : 0);
  std::string g = go;
  if (ra == 1) g = ctx.unsqueeze(g, {rank_o - 1});
  if (rb == 1) g = ctx.unsqueeze(g, {rank_o});
  std::string a2 = ra == 1 ? ctx.unsqueeze(a, {0}) : a;
  std::string b2 = rb == 1 ? ctx.unsqueeze(b, {1}) : b;
  int64_t r2a = std::max<int64_t>(ra, 2), r2b = std::max<int64_t>(rb, 2);
  int64_t r2o = std::max(r2a, r2b);

  // Static shapes of the full gradients, for deciding the batch reduction at build time.
  std::optional<SymbolicShape> ga_shape, gb_shape;
  auto sa = shape_of(ctx, a), sb = shape_of(ctx, b);
  if (sa && sb) {
    SymbolicShape ma = ra == 1 ? SymbolicShape{Dim::known(1), (*sa)[0]} : *sa;
    SymbolicShape mb = rb == 1 ? SymbolicShape{(*sb)[0], Dim::known(1)} : *sb;
    std::optional<SymbolicShape> batch = broadcast_symbolic(
        SymbolicShape(ma.begin(), ma.end() - 2), SymbolicShape(mb.begin(), mb.end() - 2));
    if (batch) {
      ga_shape = gb_shape = batch;
      ga_shape->insert(ga_shape->end(), ma.end() - 2, ma.end());
      gb_shape->insert(gb_shape->end(), mb.end() - 2, mb.end());
      if (ra == 1) ga_shape->erase(ga_shape->end() - 2);
      if (rb == 1) gb_shape->erase(gb_shape->end() - 1);
    }
  }

  if (ctx.wants_GI(0)) {
    std::string da = ctx.emit("MatMul", {g, transpose_last_two(ctx, b2, r2b)});
    if (ra == 1) da = ctx.squeeze(da, {r2o - 2});
    ctx.set_GI(0, ctx.reduce_to_shape_of(da, ga_shape, a));
  }
  if (ctx.wants_GI(1) && rb == 2 && ra >= 3) {
    ctx.set_GI(1, weight_grad_over_rows(ctx, a, go, ra));
  } else if (ctx.wants_GI(1)) {
    std::string db = ctx.emit("MatMul", {transpose_last_two(ctx, a2, r2a), g});
    if (rb == 1) db = ctx.squeeze(db, {r2o - 1});
    ctx.set_GI(1, ctx.reduce_to_shape_of(db, gb_shape, b));
  }
}

DPRUN_REGISTER_GRADIENT({.op_type = "MatMul", .since = 1, .rule = matmul_grad});

}  // namespace
}  // namespace dprun
