#pragma once
// Range's arguments, shared by the CPU and CUDA kernels: three scalar inputs of one dtype,
// start, limit and delta; the output is start + i * delta for i in [0, length).
#include <cmath>
#include <type_traits>

#include "ops/common/data_movement.h"
#include "ops/math/host_device.h"

namespace dprun {

/// Range's start, delta and output length in the inputs' dtype T.
template <class T>
struct RangeArgs {
  T start, delta;
  int64_t length;
};

class RangeParams {
 public:
  explicit RangeParams(const KernelInfo& info) : read_(info) {}

  /// The inputs' common dtype; fails naming the node unless all three are one-element tensors
  /// of one dtype. Reads only metadata.
  DType dtype(const KernelContext& ctx) const {
    const DType dtype = ctx.input(0).dtype();
    for (size_t i = 0; i < 3; ++i) {
      const Tensor& t = ctx.input(i);
      if (t.numel() != 1) ctx.fail("start, limit and delta must be scalars, got ", t.describe());
      if (t.dtype() != dtype)
        ctx.fail("start, limit and delta must share one dtype, got ", dtype_name(dtype), " and ",
                 dtype_name(t.dtype()));
    }
    return dtype;
  }

  /// The arguments as T (the dtype() of the inputs). They are read on the host: from the
  /// plan's copy when constant, else copied from the device, which waits for the work producing
  /// them (the output's length depends on them). Fails naming the node when delta is zero.
  template <class T>
  RangeArgs<T> args(const KernelContext& ctx) const {
    const T start = scalar<T>(ctx, 0), limit = scalar<T>(ctx, 1), delta = scalar<T>(ctx, 2);
    if (delta == T(0)) ctx.fail("delta must be non-zero");
    int64_t n;
    if constexpr (std::is_floating_point_v<T>) {
      n = static_cast<int64_t>(
          std::max(0.0, std::ceil((static_cast<double>(limit) - static_cast<double>(start)) /
                                  static_cast<double>(delta))));
    } else {
      // Exact integer length; differences are taken in a wider type to avoid overflow.
      using W = std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>;
      if (delta > T(0))
        n = limit > start ? static_cast<int64_t>((W(limit) - W(start) - 1) / W(delta) + 1) : 0;
      else if constexpr (std::is_signed_v<T>)
        n = start > limit ? static_cast<int64_t>((W(start) - W(limit) - 1) / -W(delta) + 1) : 0;
      else
        n = 0;
    }
    return {start, delta, n};
  }

 private:
  template <class T>
  T scalar(const KernelContext& ctx, size_t i) const {
    const Tensor& t = read_.tensor(ctx, i);
    if (t.device().type == DeviceType::CPU) return *t.data<T>();
    return *t.to(Device::cpu()).data<T>();
  }

  IntInputReader read_;
};

/// Element i of a Range: start + i * delta, rounded as the CPU computes it (in T, the product
/// rounded before the sum).
template <class T>
DPRUN_HOST_DEVICE inline T range_element(T start, T delta, int64_t i) {
  return static_cast<T>(start + static_cast<T>(i) * delta);
}

}  // namespace dprun
