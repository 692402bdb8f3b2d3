#pragma once
// Host-side planning of the CUDA elementwise kernels: the output shape of a broadcasting op
// (numpy rules, or the legacy broadcast/axis attributes before opset 7, exactly as the CPU
// kernels compute them) and how each output index maps to input offsets, and the run's
// stream. Plain C++, compiled once in elementwise_layout.cpp, which keeps the heavy CUDA
// library headers of the backend out of the .cu files.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "engine/kernel.h"
#include "ops/cuda/defs/cuda_types.h"
#include "ops/math/host_device.h"

namespace dprun::cuda_ew {

/// Most output dims the generic broadcast kernel handles, after merging adjacent dims that
/// broadcast alike (so [2,3,4] + [2,3,4] is one dim, [N,C,H,W] + [C,1,1] two).
inline constexpr int kMaxDims = 8;

/// How the inputs cover the output, from cheapest to most general.
enum class Access {
  Contiguous,    // every input has the output's element count: in[i] for out[i]
  ScalarFirst,   // input 0 is one element, the others contiguous (binary only)
  ScalarSecond,  // input 1 is one element, the others contiguous (binary only)
  Strided,       // the generic path: out index -> per-input offsets through dims and strides
  /// Strided in 32-bit index arithmetic, which a GPU divides several times faster than 64-bit:
  /// chosen at launch for outputs of fewer than 2^31 elements (no input offset is larger).
  /// Layouts never hold it.
  Strided32,
};

/// Whether a Strided layout of `numel` output elements launches as Strided32.
DPRUN_HOST_DEVICE constexpr bool fits_32_bit_index(int64_t numel) {
  return numel <= int64_t{0x7fffffff};
}

/// Per-input element strides over the merged output dims (0 where an input broadcasts),
/// passed to the device by value.
template <int N>
struct BroadcastIndex {
  int rank = 0;
  int64_t dims[kMaxDims] = {};
  int64_t strides[N][kMaxDims] = {};
};

/// Element offsets of output index i into each of the N inputs (Strided access), in the
/// arithmetic of `Index` (int64_t, or int32_t where fits_32_bit_index). The device kernels run
/// it; host-side tests check it against plain broadcasting.
template <class Index, int N>
DPRUN_HOST_DEVICE inline void input_offsets(const BroadcastIndex<N>& ix, Index i, Index (&off)[N]) {
  for (int k = 0; k < N; ++k) off[k] = 0;
  for (int d = ix.rank - 1; d > 0; --d) {
    const Index dim = static_cast<Index>(ix.dims[d]);
    const Index q = i / dim;
    const Index r = i - q * dim;
    i = q;
    for (int k = 0; k < N; ++k) off[k] += r * static_cast<Index>(ix.strides[k][d]);
  }
  // What is left of i is the outermost dim's index (i < dims[0]): no division needed.
  if (ix.rank > 0)
    for (int k = 0; k < N; ++k) off[k] += i * static_cast<Index>(ix.strides[k][0]);
}

template <int N>
struct Layout {
  Shape out_shape;
  int64_t numel = 0;
  Access access = Access::Contiguous;
  BroadcastIndex<N> index;  // set when access is Strided
};

/// Layout of a binary op with numpy broadcasting; when `legacy` (opset < 7) B is first aligned
/// to A by the broadcast/axis attributes. Fails naming the node on incompatible shapes or
/// more than kMaxDims merged dims.
Layout<2> binary_layout(const KernelContext& ctx, const Shape& a, const Shape& b, bool legacy);

/// Layout of Where(condition, X, Y), all three broadcast together, after the CPU kernel's
/// checks of the inputs' dtypes.
Layout<3> where_layout(const KernelContext& ctx, const Tensor& cond, const Tensor& x,
                       const Tensor& y);

/// The stream of the kernel's run (CudaExecutionContext::stream).
cudaStream_t stream_of(const KernelContext& ctx);

/// Throws, naming the node, when the last kernel launch on this thread failed.
void check_launch(const KernelContext& ctx);

}  // namespace dprun::cuda_ew
