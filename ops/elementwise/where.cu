// The compute of the CUDA Where(condition, X, Y) (defined in ops/elementwise/where_cuda_def.cpp),
// with numpy broadcasting over all three inputs. Values move as raw elements of their size, so
// every fixed-size dtype is supported, as on the CPU.
#include "ops/common/data_movement.h"
#include "ops/cuda/elementwise.cuh"

namespace dprun::cuda_ew {
namespace {

template <class E>
void launch_where(const KernelContext& ctx, const Layout<3>& layout, const Tensor& cond,
                  const Tensor& x, const Tensor& y, Tensor& out) {
  const int64_t n = layout.numel;
  if (n == 0) return;
  const bool* c = cond.data<bool>();
  const E* px = static_cast<const E*>(x.raw_data());
  const E* py = static_cast<const E*>(y.raw_data());
  E* po = static_cast<E*>(out.raw_data());
  if (layout.access == Access::Contiguous)
    where_kernel<Access::Contiguous>
        <<<blocks_for(n), kThreads, 0, stream_of(ctx)>>>(c, px, py, po, n, layout.index);
  else if (fits_32_bit_index(n))
    where_kernel<Access::Strided32>
        <<<blocks_for(n), kThreads, 0, stream_of(ctx)>>>(c, px, py, po, n, layout.index);
  else
    where_kernel<Access::Strided>
        <<<blocks_for(n), kThreads, 0, stream_of(ctx)>>>(c, px, py, po, n, layout.index);
  check_launch(ctx);
}

class WhereKernel : public OpKernel {
 public:
  explicit WhereKernel(const KernelInfo&) {}
  void compute(KernelContext& ctx) const override {
    const Tensor& cond = ctx.input(0);
    const Tensor& x = ctx.input(1);
    const Tensor& y = ctx.input(2);
    const Layout<3> layout = where_layout(ctx, cond, x, y);
    Tensor& out = ctx.allocate_output(0, layout.out_shape, x.dtype());
    visit_element_size(dtype_size(x.dtype()), [&](auto tag) {
      launch_where<decltype(tag)>(ctx, layout, cond, x, y, out);
    });
  }
};

DPRUN_CUDA_COMPUTE("Where", make_kernel<WhereKernel>);

}  // namespace
}  // namespace dprun::cuda_ew
