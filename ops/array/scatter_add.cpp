// ScatterAdd (rewrite domain): the output is `data` with each updates[i] added at flat position
// indices[i] (both read flat, negative indices counted from the end), duplicates summed in index
// order. It runs the phase-group scatters of a MaxPool gradient as one pass (the node's
// contract: engine/rewrites/op_fusion.h); ScatterElements with reduction="add" computes the same
// on 1-D data, but it dispatches on the element type per element.
#include "engine/kernel.h"
#include "engine/rewrites/rewrite_domain.h"

namespace dprun {
namespace {

class ScatterAddKernel : public OpKernel {
 public:
  explicit ScatterAddKernel(const KernelInfo&) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& data = ctx.input(0);
    const Tensor& indices = ctx.input(1);
    const Tensor& updates = ctx.input(2);
    if (updates.dtype() != data.dtype())
      ctx.fail("updates are ", dtype_name(updates.dtype()), " but data is ",
               dtype_name(data.dtype()));
    if (updates.numel() != indices.numel())
      ctx.fail("updates ", shape_to_string(updates.shape()), " and indices ",
               shape_to_string(indices.shape()), " must have one element count");
    if (indices.dtype() != DType::Int32 && indices.dtype() != DType::Int64)
      ctx.fail("index must be int32 or int64, got ", indices.describe());
    Tensor& y = ctx.allocate_output(0, data.shape(), data.dtype());
    y.copy_from(data);
    visit_dtype_among<float, double>(data.dtype(), [&](auto value_tag) {
      visit_dtype_among<int32_t, int64_t>(indices.dtype(), [&](auto index_tag) {
        add_at(ctx, indices.data<decltype(index_tag)>(), updates.data<decltype(value_tag)>(),
               updates.numel(), y.data<decltype(value_tag)>(), y.numel());
      });
    });
  }

 private:
  // out[at[i]] += u[i] for i < count, `at` checked against [-size, size).
  template <class I, class T>
  static void add_at(const KernelContext& ctx, const I* at, const T* u, int64_t count, T* out,
                     int64_t size) {
    for (int64_t i = 0; i < count; ++i) {
      int64_t k = static_cast<int64_t>(at[i]);
      if (k < 0) k += size;
      if (k < 0 || k >= size)
        ctx.fail("index ", static_cast<int64_t>(at[i]), " is out of range for ", size, " elements");
      out[k] += u[i];
    }
  }
};

DPRUN_REGISTER_KERNEL({.domain = kRewriteDomain,
                       .op_type = "ScatterAdd",
                       .dtypes = {DType::Float32, DType::Float64},
                       .factory = make_kernel<ScatterAddKernel>});

}  // namespace
}  // namespace dprun
