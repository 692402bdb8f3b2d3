#pragma once
// The reductions of the Reduce* family as small functors, for the CPU kernels and (under nvcc,
// DPRUN_HOST_DEVICE) the CUDA kernels alike: how an element is mapped, how two partial results
// combine, how the total becomes the output, and the accumulator type each reduction runs in.
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "ops/math/host_device.h"

namespace dprun {

enum class ReduceOp { Sum, Mean, Max, Min, Prod, L1, L2, LogSum, LogSumExp, SumSquare };

/// init/map/combine/finalize for one reduction in accumulator type A. `shift` is the
/// per-output maximum LogSumExp subtracts for stability (0 for the other reductions).
template <ReduceOp Op, class A>
struct Reducer {
  /// The value an empty reduction gives (host only).
  static A init() {
    if constexpr (Op == ReduceOp::Max)
      return std::numeric_limits<A>::has_infinity ? -std::numeric_limits<A>::infinity()
                                                  : std::numeric_limits<A>::lowest();
    else if constexpr (Op == ReduceOp::Min)
      return std::numeric_limits<A>::has_infinity ? std::numeric_limits<A>::infinity()
                                                  : std::numeric_limits<A>::max();
    else if constexpr (Op == ReduceOp::Prod)
      return A(1);
    else
      return A(0);
  }
  DPRUN_HOST_DEVICE static A map(A x, A shift) {
    if constexpr (Op == ReduceOp::L1) {
      if constexpr (std::is_signed_v<A>) return x < A(0) ? A(-x) : x;
      return x;
    } else if constexpr (Op == ReduceOp::L2 || Op == ReduceOp::SumSquare) {
      return static_cast<A>(x * x);
    } else if constexpr (Op == ReduceOp::LogSumExp) {
      return static_cast<A>(std::exp(x - shift));
    } else {
      (void)shift;
      return x;
    }
  }
  DPRUN_HOST_DEVICE static A combine(A a, A b) {
    // b != b: b is NaN (never for integers); Max and Min propagate NaN.
    if constexpr (Op == ReduceOp::Max)
      return (b > a || b != b) ? b : a;
    else if constexpr (Op == ReduceOp::Min)
      return (b < a || b != b) ? b : a;
    else if constexpr (Op == ReduceOp::Prod)
      return static_cast<A>(a * b);
    else
      return static_cast<A>(a + b);
  }
  DPRUN_HOST_DEVICE static A finalize(A acc, int64_t count, A shift) {
    if constexpr (Op == ReduceOp::Mean)
      return static_cast<A>(acc / static_cast<A>(count));
    else if constexpr (Op == ReduceOp::L2)
      return static_cast<A>(std::sqrt(acc));
    else if constexpr (Op == ReduceOp::LogSum)
      return static_cast<A>(std::log(acc));
    else if constexpr (Op == ReduceOp::LogSumExp)
      return static_cast<A>(std::log(acc) + shift);
    else
      return acc;
  }
};

/// Accumulator type: double for floating inputs (float32 sums stay accurate over long rows)
/// and for the reductions whose result is not an integer; T itself for integer sums, products
/// and extrema, which wrap like the input type.
template <ReduceOp Op, class T>
using acc_type_t =
    std::conditional_t<!std::is_integral_v<T> || Op == ReduceOp::Mean || Op == ReduceOp::L2 ||
                           Op == ReduceOp::LogSum || Op == ReduceOp::LogSumExp,
                       double, T>;

}  // namespace dprun
