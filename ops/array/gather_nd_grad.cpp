// GatherND: each index tuple of I picks a slice of X, so dX sums the slices of dY into the
// positions the tuples name; repeated tuples accumulate, negative indices count from the end.
//
// From opset 16 one ScatterND with reduction "add" into zeros does it. With batch_dims b > 0
// the tuples index within each batch entry, which ScatterND cannot express: the b batch axes
// are merged into one of size B, each tuple gets its batch position prepended ([B, R, 1 + k]
// indices), the ScatterND runs on [B, X.shape[b:]...] and the result is reshaped to X's shape.
//
// Opsets 11-15 (ScatterND cannot add there): each tuple becomes one flat position among the
// N = prod(X.shape[b:b+k]) it can name (Horner's rule over its k entries, so k must be known
// when the graph is built), and a OneHot of those positions, [B, R, N], transposed and
// multiplied by dY as [B, R, S] sums the slices into [B, N, S]. The one-hot holds R * N
// elements per batch entry: fine for small lookups, large for an embedding table.
#include <limits>

#include "ops/grad/grad_util.h"

namespace dprun {
namespace {

constexpr int64_t kEnd = std::numeric_limits<int64_t>::max();

// X, the indices and dY with the batch axes merged.
struct Batched {
  std::string x_dims;  // Shape(X)
  std::string batch;   // [B]
  std::string k;       // [k]
  std::string idx;     // int64 [B, R, k]
  std::string tuples;  // [R]
};

Batched batched(GradientContext& ctx, int64_t b) {
  Attribute axis0 = Attribute::of_int(0);
  Batched v;
  v.x_dims = ctx.emit("Shape", {ctx.I(0)});
  v.batch = grad::reduce(ctx, "ReduceProd",
                         ctx.emit("Slice", {v.x_dims, ctx.ints({0}), ctx.ints({b})}), {}, true);
  v.k = ctx.emit("Slice", {ctx.emit("Shape", {ctx.I(1)}), ctx.ints({-1}), ctx.ints({kEnd})});
  v.idx =
      ctx.emit("Reshape", {ctx.cast(ctx.I(1), DType::Int64),
                           ctx.emit("Concat", {v.batch, ctx.ints({-1}), v.k}, {{"axis", axis0}})});
  v.tuples = ctx.emit("Gather", {ctx.emit("Shape", {v.idx}), ctx.ints({1})});
  return v;
}

// dY as [B, R] followed by `tail`.
std::string batched_dy(GradientContext& ctx, const Batched& v, const std::string& tail) {
  return ctx.emit("Reshape", {ctx.GO(0), ctx.emit("Concat", {v.batch, v.tuples, tail},
                                                  {{"axis", Attribute::of_int(0)}})});
}

std::string scatter_add(GradientContext& ctx, const std::string& zeros, const std::string& idx,
                        const std::string& updates) {
  return ctx.emit("ScatterND", {zeros, idx, updates}, {{"reduction", Attribute::of_string("add")}});
}

std::string batched_scatter_add(GradientContext& ctx, int64_t b) {
  Attribute axis0 = Attribute::of_int(0);
  Batched v = batched(ctx, b);
  // Each tuple's batch position, [B, R, 1], before its entries.
  std::string positions = ctx.emit(
      "Range",
      {ctx.scalar(0, DType::Int64), ctx.emit("Squeeze", {v.batch}), ctx.scalar(1, DType::Int64)});
  positions = ctx.emit("Expand",
                       {ctx.emit("Reshape", {positions, ctx.ints({-1, 1, 1})}),
                        ctx.emit("Concat", {v.batch, v.tuples, ctx.ints({1})}, {{"axis", axis0}})});
  std::string idx = ctx.emit("Concat", {positions, v.idx}, {{"axis", Attribute::of_int(-1)}});
  std::string tail =
      ctx.emit("Slice", {v.x_dims, ctx.emit("Add", {v.k, ctx.ints({b})}), ctx.ints({kEnd})});
  std::string rest = ctx.emit("Slice", {v.x_dims, ctx.ints({b}), ctx.ints({kEnd})});
  std::string zeros = grad::zeros_of_shape(
      ctx, ctx.emit("Concat", {v.batch, rest}, {{"axis", axis0}}), ctx.dtype_of(ctx.I(0)));
  return ctx.emit("Reshape", {scatter_add(ctx, zeros, idx, batched_dy(ctx, v, tail)), v.x_dims});
}

std::string one_hot_sum(GradientContext& ctx, int64_t b) {
  auto idx_dims = grad::static_dims(ctx, ctx.I(1));
  if (!idx_dims || idx_dims->empty())
    ctx.fail(
        "before ai.onnx opset 16 the gradient needs the indices' last dim known when the "
        "graph is built");
  int64_t k = idx_dims->back();
  Batched v = batched(ctx, b);
  // Negative entries count from their axis' size.
  std::string sizes = ctx.emit("Slice", {v.x_dims, ctx.ints({b}), ctx.ints({b + k})});
  std::string idx = v.idx;
  idx = ctx.emit("Where", {ctx.emit("Less", {idx, ctx.scalar(0, DType::Int64)}),
                           ctx.emit("Add", {idx, sizes}), idx});
  auto entry = [&](int64_t j) {
    return ctx.emit("Gather", {idx, ctx.scalar(static_cast<double>(j), DType::Int64)},
                    {{"axis", Attribute::of_int(2)}});
  };
  std::string flat = entry(0);  // [B, R]
  for (int64_t j = 1; j < k; ++j) {
    std::string size =
        ctx.emit("Gather", {v.x_dims, ctx.scalar(static_cast<double>(b + j), DType::Int64)});
    flat = ctx.emit("Add", {ctx.emit("Mul", {flat, size}), entry(j)});
  }
  DType dtype = ctx.dtype_of(ctx.I(0));
  std::string values = ctx.cast(ctx.constant(Tensor::from_vector<double>({2}, {0, 1})), dtype);
  std::string hot =
      ctx.emit("OneHot", {flat, grad::reduce(ctx, "ReduceProd", sizes, {}, true), values});
  std::string hot_t = ctx.emit("Transpose", {hot}, {{"perm", Attribute::of_ints({0, 2, 1})}});
  std::string sums = ctx.emit("MatMul", {hot_t, batched_dy(ctx, v, ctx.ints({-1}))});
  return ctx.emit("Reshape", {sums, v.x_dims});
}

void gather_nd_grad(GradientContext& ctx) {
  int64_t b = ctx.node().attr_int("batch_dims", 0);
  if (ctx.onnx_opset() < 16) {
    ctx.set_GI(0, one_hot_sum(ctx, b));
  } else if (b == 0) {
    ctx.set_GI(0, scatter_add(ctx, grad::zeros_like(ctx, ctx.I(0)), ctx.I(1), ctx.GO(0)));
  } else {
    ctx.set_GI(0, batched_scatter_add(ctx, b));
  }
}

DPRUN_REGISTER_GRADIENT({.op_type = "GatherND", .since = 11, .rule = gather_nd_grad});

}  // namespace
}  // namespace dprun
