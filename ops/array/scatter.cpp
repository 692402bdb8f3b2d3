// ScatterND, ScatterElements and the older Scatter (9/10): the output starts as a copy of
// data, then updates are written (or combined with a reduction) at validated indices. Updates
// apply in index order so duplicate indices with a reduction accumulate deterministically.
#include "ops/array/scatter.h"

#include "engine/op_facts.h"
#include "ops/common/data_movement.h"

namespace dprun {
namespace {

using Reduction = ScatterReduction;

template <class T>
T combine(T a, T b, Reduction r) {
  if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
    return T(scatter_combine(static_cast<float>(a), static_cast<float>(b), r));
  } else {
    return scatter_combine(a, b, r);
  }
}

/// The output as a copy of `data` (input 0), or written over data's own memory where its value
/// dies here (KernelContext::allocate_output_reusing): the scatter then writes the updated
/// elements alone, with no copy and no second buffer (a loss gradient scattering into zeros of
/// the scores' size).
Tensor& output_from_data(KernelContext& ctx, const Tensor& data) {
  if (data.dtype() != DType::String && ctx.input_reusable(0, data.shape(), data.dtype()))
    return ctx.allocate_output_reusing(0, 0, data.shape(), data.dtype());
  Tensor& y = ctx.allocate_output(0, data.shape(), data.dtype());
  y.copy_from(data);
  return y;
}

/// Applies `count` elements of `upd` onto `dst` with the reduction (plain copy for None).
void apply(void* dst, const void* upd, int64_t count, DType dtype, Reduction red) {
  if (red == Reduction::None) {
    std::memcpy(dst, upd, static_cast<size_t>(count) * dtype_size(dtype));
    return;
  }
  visit_dtype(dtype, [&](auto zero) {
    using T = decltype(zero);
    T* d = static_cast<T*>(dst);
    const T* u = static_cast<const T*>(upd);
    for (int64_t i = 0; i < count; ++i) d[i] = combine(d[i], u[i], red);
  });
}

class ScatterNDKernel : public OpKernel {
 public:
  explicit ScatterNDKernel(const KernelInfo& info)
      : reduction_(parse_scatter_reduction(info.node)) {}
  void compute(KernelContext& ctx) const override {
    const Tensor& data = ctx.input(0);
    const Tensor& indices = ctx.input(1);
    const Tensor& updates = ctx.input(2);
    const Shape& ds = data.shape();
    const Shape& is = indices.shape();
    const int64_t r = data.rank(), q = indices.rank();
    if (q < 1) ctx.fail("indices must have rank >= 1, got ", indices.describe());
    const int64_t k = is.back();
    if (k < 0 || k > r)
      ctx.fail("the last dim of indices ", shape_to_string(is), " exceeds rank ", r);
    Shape expected(is.begin(), is.end() - 1);
    expected.insert(expected.end(), ds.begin() + k, ds.end());
    if (updates.shape() != expected || updates.dtype() != data.dtype())
      ctx.fail("updates ", updates.describe(), " must have dtype ", dtype_name(data.dtype()),
               " and shape ", shape_to_string(expected));
    if (indices.dtype() != DType::Int32 && indices.dtype() != DType::Int64)
      ctx.fail("indices must be int32 or int64, got ", indices.describe());
    const std::vector<int64_t> raw = read_int64_values(indices, ctx, "indices");
    const std::vector<int64_t> strides = contiguous_strides(ds);
    int64_t slice = 1;
    for (int64_t d = k; d < r; ++d) slice *= ds[static_cast<size_t>(d)];
    const int64_t tuples = shape_numel(Shape(is.begin(), is.end() - 1));
    std::vector<int64_t> offsets(static_cast<size_t>(tuples));
    for (int64_t t = 0; t < tuples; ++t) {
      int64_t off = 0;
      for (int64_t j = 0; j < k; ++j) {
        const size_t d = static_cast<size_t>(j);
        off +=
            normalize_index(raw[static_cast<size_t>(t * k + j)], ds[d], ctx, "index") * strides[d];
      }
      offsets[static_cast<size_t>(t)] = off;
    }
    Tensor& y = output_from_data(ctx, data);
    const size_t elem = dtype_size(data.dtype());
    char* dst = static_cast<char*>(y.raw_data());
    const char* upd = static_cast<const char*>(updates.raw_data());
    for (int64_t t = 0; t < tuples; ++t)
      apply(dst + static_cast<size_t>(offsets[static_cast<size_t>(t)]) * elem,
            upd + static_cast<size_t>(t * slice) * elem, slice, data.dtype(), reduction_);
  }

 private:
  Reduction reduction_;
};

class ScatterElementsKernel : public OpKernel {
 public:
  explicit ScatterElementsKernel(const KernelInfo& info)
      : axis_(info.node.attr_int("axis", 0)), reduction_(parse_scatter_reduction(info.node)) {}
  void compute(KernelContext& ctx) const override {
    const Tensor& data = ctx.input(0);
    const Tensor& indices = ctx.input(1);
    const Tensor& updates = ctx.input(2);
    const int64_t r = data.rank();
    const int64_t axis = check_scatter_elements(ctx, data, indices, updates, axis_);
    const Shape& ds = data.shape();
    const Shape& is = indices.shape();
    const std::vector<int64_t> idx =
        read_indices(indices, ds[static_cast<size_t>(axis)], ctx, "index");
    Tensor& y = output_from_data(ctx, data);
    std::vector<int64_t> strides = contiguous_strides(ds);
    const int64_t axis_stride = strides[static_cast<size_t>(axis)];
    strides[static_cast<size_t>(axis)] = 0;
    const std::vector<int64_t> none(static_cast<size_t>(r), 0);
    const size_t elem = dtype_size(data.dtype());
    char* dst = static_cast<char*>(y.raw_data());
    const char* upd = static_cast<const char*>(updates.raw_data());
    if (idx.empty()) return;
    Odometer od(is, strides, none, 0);
    for (size_t i = 0; i < idx.size(); ++i, od.next())
      apply(dst + static_cast<size_t>(od.a + idx[i] * axis_stride) * elem, upd + i * elem, 1,
            data.dtype(), reduction_);
  }

 private:
  int64_t axis_;
  Reduction reduction_;
};

DPRUN_REGISTER_KERNEL({.op_type = "ScatterND",
                       .since = 11,
                       .factory = make_kernel<ScatterNDKernel>});
DPRUN_REGISTER_KERNEL({.op_type = "ScatterElements",
                       .since = 11,
                       .factory = make_kernel<ScatterElementsKernel>});
DPRUN_REGISTER_KERNEL({.op_type = "Scatter",
                       .since = 9,
                       .factory = make_kernel<ScatterElementsKernel>});

}  // namespace
}  // namespace dprun

// The ops' facts (engine/op_facts.h): output types, shapes, 16-bit and layout policy.
namespace dprun {
namespace {
DPRUN_REGISTER_OP_FACTS({.op_type = "Scatter"});
DPRUN_REGISTER_OP_FACTS({.op_type = "ScatterElements"});
DPRUN_REGISTER_OP_FACTS({.op_type = "ScatterND"});

}  // namespace
}  // namespace dprun
