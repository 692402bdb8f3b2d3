#include "ops/cuda/elementwise_layout.h"

#include <array>

#include "engine/backends/cuda/cuda_check.h"
#include "engine/backends/cuda/cuda_execution_context.h"
#include "ops/common/elementwise.h"

namespace dprun::cuda_ew {
namespace {

template <size_t N>
Layout<static_cast<int>(N)> make_layout(const KernelContext& ctx,
                                        const std::array<const Shape*, N>& ins) {
  constexpr int kN = static_cast<int>(N);
  Layout<kN> layout;
  layout.out_shape = ew::broadcast_all(ctx, std::vector<const Shape*>(ins.begin(), ins.end()));
  layout.numel = shape_numel(layout.out_shape);
  std::array<int64_t, N> counts;
  for (size_t k = 0; k < N; ++k) counts[k] = shape_numel(*ins[k]);
  auto all_full_except = [&](size_t skip) {
    for (size_t k = 0; k < N; ++k)
      if (k != skip && counts[k] != layout.numel) return false;
    return true;
  };
  // An input with the output's element count is the output's shape up to leading 1s.
  if (all_full_except(N)) return layout;
  if constexpr (N == 2) {
    if (counts[0] == 1 && all_full_except(0)) {
      layout.access = Access::ScalarFirst;
      return layout;
    }
    if (counts[1] == 1 && all_full_except(1)) {
      layout.access = Access::ScalarSecond;
      return layout;
    }
  }
  // The CPU kernels' plan merges adjacent dims that every input walks alike.
  const auto plan = ew::make_plan<N>(layout.out_shape, ins);
  const size_t rank = plan.dims.size();
  if (rank > static_cast<size_t>(kMaxDims))
    ctx.fail("broadcasting to ", shape_to_string(layout.out_shape), " needs ", rank,
             " dims after merging; the CUDA elementwise kernels handle at most ", kMaxDims);
  layout.access = Access::Strided;
  layout.index.rank = static_cast<int>(rank);
  for (size_t d = 0; d < rank; ++d) {
    layout.index.dims[d] = plan.dims[d];
    for (size_t k = 0; k < N; ++k) layout.index.strides[k][d] = plan.strides[k][d];
  }
  return layout;
}

}  // namespace

Layout<2> binary_layout(const KernelContext& ctx, const Shape& a, const Shape& b, bool legacy) {
  if (!legacy) return make_layout<2>(ctx, {&a, &b});
  const Shape aligned = ew::legacy_aligned_shape(ctx, a, b);
  return make_layout<2>(ctx, {&a, &aligned});
}

Layout<3> where_layout(const KernelContext& ctx, const Tensor& cond, const Tensor& x,
                       const Tensor& y) {
  ew::check_where_inputs(ctx, cond, x, y);
  return make_layout<3>(ctx, {&cond.shape(), &x.shape(), &y.shape()});
}

cudaStream_t stream_of(const KernelContext& ctx) {
  return CudaExecutionContext::of(ctx.execution()).stream();
}

void check_launch(const KernelContext& ctx) {
  cuda_check(cudaGetLastError(), ctx.node().op_type, " node '", ctx.node().name,
             "': kernel launch");
}

}  // namespace dprun::cuda_ew
