#pragma once
// The CUDA elementwise kernels: one grid-stride device kernel per family (unary, broadcasting
// binary, Where) running the ops/math functors, the OpKernel classes that launch them on the
// run's stream, and the registration macro. Output shapes and broadcast strides are planned on
// the host (elementwise_layout.h); the device only maps indices.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "engine/kernel.h"
#include "ops/cuda/defs/cuda_compute.h"
#include "ops/cuda/defs/cuda_types.h"
#include "ops/cuda/elementwise_layout.h"
#include "ops/cuda/half_convert.cuh"
#include "ops/math/make_functor.h"

namespace dprun::cuda_ew {

/// Calls f(T{}) for the T of `t` in the list; fails naming the node otherwise.
template <class... Ts, class F>
void dispatch(TypeList<Ts...>, DType t, const KernelContext& ctx, F&& f) {
  const bool found = ((t == dtype_of<Ts>() && (f(Ts{}), true)) || ...);
  if (!found) ctx.fail("input dtype ", dtype_name(t), " is not supported by this operator on CUDA");
}

inline constexpr int kThreads = 256;
/// Beyond this many blocks each thread handles several elements (grid-stride loops).
inline constexpr int64_t kMaxBlocks = int64_t{1} << 20;

inline unsigned blocks_for(int64_t n) {
  return static_cast<unsigned>(std::min((n + kThreads - 1) / kThreads, kMaxBlocks));
}

#define DPRUN_CUDA_GRID_STRIDE(i, n)                                                     \
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)

template <class TI, class TO, class Op>
__global__ void unary_kernel(Op op, const TI* __restrict__ in, TO* __restrict__ out, int64_t n) {
  DPRUN_CUDA_GRID_STRIDE(i, n) {
    out[i] = cuda_half::store<TO>(op(cuda_half::load(in[i])));
  }
}

template <Access kAccess, class TA, class TB, class TO, class Op>
__global__ void binary_kernel(Op op, const TA* __restrict__ a, const TB* __restrict__ b,
                              TO* __restrict__ out, int64_t n, BroadcastIndex<2> ix) {
  using cuda_half::load;
  DPRUN_CUDA_GRID_STRIDE(i, n) {
    if constexpr (kAccess == Access::Contiguous) {
      out[i] = cuda_half::store<TO>(op(load(a[i]), load(b[i])));
    } else if constexpr (kAccess == Access::ScalarFirst) {
      out[i] = cuda_half::store<TO>(op(load(a[0]), load(b[i])));
    } else if constexpr (kAccess == Access::ScalarSecond) {
      out[i] = cuda_half::store<TO>(op(load(a[i]), load(b[0])));
    } else if constexpr (kAccess == Access::Strided32) {
      int32_t off[2];
      input_offsets(ix, static_cast<int32_t>(i), off);
      out[i] = cuda_half::store<TO>(op(load(a[off[0]]), load(b[off[1]])));
    } else {
      int64_t off[2];
      input_offsets(ix, i, off);
      out[i] = cuda_half::store<TO>(op(load(a[off[0]]), load(b[off[1]])));
    }
  }
}

template <Access kAccess, class E>
__global__ void where_kernel(const bool* __restrict__ cond, const E* __restrict__ x,
                             const E* __restrict__ y, E* __restrict__ out, int64_t n,
                             BroadcastIndex<3> ix) {
  DPRUN_CUDA_GRID_STRIDE(i, n) {
    if constexpr (kAccess == Access::Contiguous) {
      out[i] = cond[i] ? x[i] : y[i];
    } else if constexpr (kAccess == Access::Strided32) {
      int32_t off[3];
      input_offsets(ix, static_cast<int32_t>(i), off);
      out[i] = cond[off[0]] ? x[off[1]] : y[off[2]];
    } else {
      int64_t off[3];
      input_offsets(ix, i, off);
      out[i] = cond[off[0]] ? x[off[1]] : y[off[2]];
    }
  }
}

#undef DPRUN_CUDA_GRID_STRIDE

template <class TI, class TO, class Op>
void launch_unary(const KernelContext& ctx, const Op& op, const TI* in, TO* out, int64_t n) {
  if (n == 0) return;
  unary_kernel<<<blocks_for(n), kThreads, 0, stream_of(ctx)>>>(op, in, out, n);
  check_launch(ctx);
}

/// out = op(a, b) over `layout`, one kernel per access pattern.
template <class TA, class TB, class TO, class Op>
void launch_binary(const KernelContext& ctx, const Op& op, const Layout<2>& layout, const TA* a,
                   const TB* b, TO* out) {
  const int64_t n = layout.numel;
  if (n == 0) return;
  auto launch = [&](auto access) {
    binary_kernel<decltype(access)::value>
        <<<blocks_for(n), kThreads, 0, stream_of(ctx)>>>(op, a, b, out, n, layout.index);
  };
  switch (layout.access) {
    case Access::Contiguous:
      launch(std::integral_constant<Access, Access::Contiguous>{});
      break;
    case Access::ScalarFirst:
      launch(std::integral_constant<Access, Access::ScalarFirst>{});
      break;
    case Access::ScalarSecond:
      launch(std::integral_constant<Access, Access::ScalarSecond>{});
      break;
    case Access::Strided:
    case Access::Strided32:
      if (fits_32_bit_index(n))
        launch(std::integral_constant<Access, Access::Strided32>{});
      else
        launch(std::integral_constant<Access, Access::Strided>{});
      break;
  }
  check_launch(ctx);
}

/// y = op(x), elementwise; a bool result when kBoolOut.
template <class Op, class TypesT, bool kBoolOut = false>
class UnaryKernel : public OpKernel {
 public:
  using Types = TypesT;
  explicit UnaryKernel(const KernelInfo& info) : op_(ew::make_functor<Op>(info)) {}
  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    Tensor& y = ctx.allocate_output(0, x.shape(), kBoolOut ? DType::Bool : x.dtype());
    dispatch(Types{}, x.dtype(), ctx, [&](auto tag) {
      using T = decltype(tag);
      using O = std::conditional_t<kBoolOut, bool, T>;
      launch_unary(ctx, op_, x.data<T>(), y.data<O>(), x.numel());
    });
  }

 private:
  Op op_;
};

/// out = op(a, b) with numpy broadcasting (legacy broadcast/axis before opset 7); a bool
/// result when kBoolOut. Both inputs have one dtype.
template <class Op, class TypesT, bool kBoolOut = false>
class BinaryKernel : public OpKernel {
 public:
  using Types = TypesT;
  explicit BinaryKernel(const KernelInfo& info)
      : op_(ew::make_functor<Op>(info)), legacy_(ew::is_legacy_broadcast(info)) {}
  void compute(KernelContext& ctx) const override {
    const Tensor& a = ctx.input(0);
    const Tensor& b = ctx.input(1);
    if (a.dtype() != b.dtype())
      ctx.fail("inputs have different dtypes ", dtype_name(a.dtype()), " and ",
               dtype_name(b.dtype()));
    const Layout<2> layout = binary_layout(ctx, a.shape(), b.shape(), legacy_);
    Tensor& out = ctx.allocate_output(0, layout.out_shape, kBoolOut ? DType::Bool : a.dtype());
    dispatch(Types{}, a.dtype(), ctx, [&](auto tag) {
      using T = decltype(tag);
      using O = std::conditional_t<kBoolOut, bool, T>;
      launch_binary(ctx, op_, layout, a.data<T>(), b.data<T>(), out.data<O>());
    });
  }

 private:
  Op op_;
  bool legacy_;
};

}  // namespace dprun::cuda_ew

/// Supplies the compute of a CUDA elementwise op, defined in ops/cuda/defs with
/// DPRUN_CUDA_ELEMENTWISE_DEF: the kernel class, whose Types list the definition must name.
#define DPRUN_CUDA_ELEMENTWISE(op, ...) DPRUN_CUDA_COMPUTE(op, ::dprun::make_kernel<__VA_ARGS__>)
