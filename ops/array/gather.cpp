// Gather, GatherElements, GatherND. Indices are validated (negatives count from the end)
// before any data moves; rows are copied by element size so every dtype shares one path.
#include "ops/array/gather.h"
#include "engine/autograd/shape_rules.h"
#include "engine/op_facts.h"

namespace dprun {
namespace {

/// Copies `count` rows of `row` elements: dst row j comes from src row rows[j].
template <class U>
void copy_rows(const ExecutionContext& exec, const U* src, const int64_t* rows, int64_t count,
               int64_t row, U* dst) {
  const int64_t grain = std::max<int64_t>(1, (1 << 14) / std::max<int64_t>(row, 1));
  exec.parallel_for(count, grain, [&](int64_t begin, int64_t end) {
    if (row == 1) {
      for (int64_t j = begin; j < end; ++j) dst[j] = src[rows[j]];
    } else {
      for (int64_t j = begin; j < end; ++j)
        std::memcpy(dst + j * row, src + rows[j] * row, static_cast<size_t>(row) * sizeof(U));
    }
  });
}

class GatherKernel : public OpKernel {
 public:
  explicit GatherKernel(const KernelInfo& info) : axis_(info.node.attr_int("axis", 0)) {}
  void compute(KernelContext& ctx) const override {
    const Tensor& data = ctx.input(0);
    const Tensor& indices = ctx.input(1);
    const GatherLayout g = gather_layout(data.shape(), indices.shape(), axis_, ctx);
    const int64_t dim = g.dim, outer = g.outer, inner = g.inner;
    std::vector<int64_t> idx = read_indices(indices, dim, ctx, "index");
    Tensor& y = ctx.allocate_output(0, g.out_shape, data.dtype());
    const int64_t n = static_cast<int64_t>(idx.size());
    if (outer > 1) {
      // Flatten (outer, index) pairs into source row numbers over [outer * dim] rows.
      std::vector<int64_t> rows(static_cast<size_t>(outer * n));
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t j = 0; j < n; ++j)
          rows[static_cast<size_t>(o * n + j)] = o * dim + idx[static_cast<size_t>(j)];
      idx.swap(rows);
    }
    visit_element_size(dtype_size(data.dtype()), [&](auto zero) {
      using U = decltype(zero);
      copy_rows(ctx.execution(), static_cast<const U*>(data.raw_data()), idx.data(),
                static_cast<int64_t>(idx.size()), inner, static_cast<U*>(y.raw_data()));
    });
  }

 private:
  int64_t axis_;
};

class GatherElementsKernel : public OpKernel {
 public:
  explicit GatherElementsKernel(const KernelInfo& info) : axis_(info.node.attr_int("axis", 0)) {}
  void compute(KernelContext& ctx) const override {
    const Tensor& data = ctx.input(0);
    const Tensor& indices = ctx.input(1);
    const int64_t r = data.rank();
    if (r == 0) ctx.fail("data must have rank >= 1, got a scalar");
    const int64_t axis = normalize_axis_attr(axis_, r, ctx);
    const Shape& ds = data.shape();
    const Shape& is = indices.shape();
    bool ok = indices.rank() == r;
    for (int64_t d = 0; ok && d < r; ++d)
      ok = d == axis || is[static_cast<size_t>(d)] <= ds[static_cast<size_t>(d)];
    if (!ok)
      ctx.fail("indices ", shape_to_string(is), " do not fit data ", shape_to_string(ds),
               " (same rank, no larger outside axis ", axis_, ")");
    const std::vector<int64_t> idx =
        read_indices(indices, ds[static_cast<size_t>(axis)], ctx, "index");
    Tensor& y = ctx.allocate_output(0, is, data.dtype());
    std::vector<int64_t> data_strides = contiguous_strides(ds);
    const int64_t axis_stride = data_strides[static_cast<size_t>(axis)];
    data_strides[static_cast<size_t>(axis)] = 0;
    const std::vector<int64_t> none(static_cast<size_t>(r), 0);
    visit_element_size(dtype_size(data.dtype()), [&](auto zero) {
      using U = decltype(zero);
      const U* src = static_cast<const U*>(data.raw_data());
      U* dst = static_cast<U*>(y.raw_data());
      ctx.parallel_for(static_cast<int64_t>(idx.size()), 1 << 14, [&](int64_t begin, int64_t end) {
        Odometer od(is, data_strides, none, begin);
        for (int64_t i = begin; i < end; ++i, od.next())
          dst[i] = src[od.a + idx[static_cast<size_t>(i)] * axis_stride];
      });
    });
  }

 private:
  int64_t axis_;
};

class GatherNDKernel : public OpKernel {
 public:
  explicit GatherNDKernel(const KernelInfo& info)
      : batch_dims_(info.node.attr_int("batch_dims", 0)) {}
  void compute(KernelContext& ctx) const override {
    const Tensor& data = ctx.input(0);
    const Tensor& indices = ctx.input(1);
    const Shape& ds = data.shape();
    const Shape& is = indices.shape();
    const int64_t r = data.rank(), q = indices.rank(), b = batch_dims_;
    if (r < 1 || q < 1) ctx.fail("data and indices must have rank >= 1");
    if (b < 0 || b >= std::min(r, q))
      ctx.fail("batch_dims ", b, " must be in [0, min(rank(data), rank(indices)))");
    for (int64_t d = 0; d < b; ++d)
      if (ds[static_cast<size_t>(d)] != is[static_cast<size_t>(d)])
        ctx.fail("batch dims of data ", shape_to_string(ds), " and indices ", shape_to_string(is),
                 " differ");
    const int64_t k = is.back();
    if (k < 1 || k > r - b)
      ctx.fail("the last dim of indices ", shape_to_string(is), " must be in [1, ", r - b, "]");
    Shape out_shape(is.begin(), is.end() - 1);
    out_shape.insert(out_shape.end(), ds.begin() + b + k, ds.end());
    int64_t batches = 1, tuples = 1, slice = 1;
    for (int64_t d = 0; d < b; ++d) batches *= ds[static_cast<size_t>(d)];
    for (int64_t d = b; d < q - 1; ++d) tuples *= is[static_cast<size_t>(d)];
    for (int64_t d = b + k; d < r; ++d) slice *= ds[static_cast<size_t>(d)];
    const std::vector<int64_t> strides = contiguous_strides(ds);
    const int64_t batch_stride = b > 0 ? strides[static_cast<size_t>(b - 1)] : 0;
    if (indices.dtype() != DType::Int32 && indices.dtype() != DType::Int64)
      ctx.fail("indices must be int32 or int64, got ", indices.describe());
    const std::vector<int64_t> raw = read_int64_values(indices, ctx, "indices");
    // Source element offset (in units of slices) of each gathered slice.
    std::vector<int64_t> rows(static_cast<size_t>(batches * tuples));
    for (int64_t bi = 0; bi < batches; ++bi)
      for (int64_t t = 0; t < tuples; ++t) {
        const int64_t* tuple = raw.data() + (bi * tuples + t) * k;
        int64_t off = bi * batch_stride;
        for (int64_t j = 0; j < k; ++j) {
          const size_t d = static_cast<size_t>(b + j);
          off += normalize_index(tuple[j], ds[d], ctx, "index") * strides[d];
        }
        rows[static_cast<size_t>(bi * tuples + t)] = slice > 0 ? off / slice : 0;
      }
    Tensor& y = ctx.allocate_output(0, out_shape, data.dtype());
    visit_element_size(dtype_size(data.dtype()), [&](auto zero) {
      using U = decltype(zero);
      copy_rows(ctx.execution(), static_cast<const U*>(data.raw_data()), rows.data(),
                static_cast<int64_t>(rows.size()), slice, static_cast<U*>(y.raw_data()));
    });
  }

 private:
  int64_t batch_dims_;
};

DPRUN_REGISTER_KERNEL({.op_type = "Gather", .since = 1, .factory = make_kernel<GatherKernel>});
DPRUN_REGISTER_KERNEL({.op_type = "GatherElements",
                       .since = 11,
                       .factory = make_kernel<GatherElementsKernel>});
DPRUN_REGISTER_KERNEL({.op_type = "GatherND", .since = 11, .factory = make_kernel<GatherNDKernel>});

}  // namespace
}  // namespace dprun

// The ops' facts (engine/op_facts.h): output types, shapes, 16-bit and layout policy.
namespace dprun {
namespace {

// data's dims with the one at `axis` replaced by the indices' dims.
std::optional<SymbolicShape> gather_shape(const ShapeQuery& q) {
  if (q.output != 0) return std::nullopt;
  auto data = q.input(0);
  auto indices = q.input(1);
  if (auto c = q.constant(1)) indices = from_dims(c->shape());
  if (!data || !indices) return std::nullopt;
  auto axis = axis_in(q.node.attr_int("axis", 0), static_cast<int64_t>(data->size()));
  if (!axis) return std::nullopt;
  SymbolicShape out(data->begin(), data->begin() + *axis);
  out.insert(out.end(), indices->begin(), indices->end());
  out.insert(out.end(), data->begin() + *axis + 1, data->end());
  return out;
}

DPRUN_REGISTER_OP_FACTS({.op_type = "Gather", .shape_rule = gather_shape});
DPRUN_REGISTER_OP_FACTS({.op_type = "GatherElements"});
DPRUN_REGISTER_OP_FACTS({.op_type = "GatherND"});

}  // namespace
}  // namespace dprun
