#pragma once
// Clip's elementwise math, shared by the CPU and CUDA kernels.
#include "ops/math/select.h"

namespace dprun::math {

/// v limited to [lo, hi]; hi wins when lo > hi (every element becomes hi), and NaN passes
/// through (it compares false). Branch-free on the host (math::select) so loops vectorise.
template <class C>
DPRUN_HOST_DEVICE inline C clip(C v, C lo, C hi) {
  v = select(v < lo, lo, v);
  return select(v > hi, hi, v);
}

}  // namespace dprun::math
