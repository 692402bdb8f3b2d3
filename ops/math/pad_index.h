#pragma once
// Pad's index mapping, shared by the CPU and CUDA kernels: where an output coordinate along one
// dimension reads from in the input.
#include <cstdint>

#include "ops/math/host_device.h"

namespace dprun::math {

enum class PadMode { Constant, Reflect, Edge, Wrap };

/// The input coordinate that input coordinate `i` (output coordinate minus the leading pad)
/// reads along a dimension of size `n`, or -1 when it is padding with the constant. Inside
/// [0, n) it is i itself; outside, constant mode gives -1, edge the nearest end, wrap i mod n,
/// and reflect mirrors about the ends without repeating them. Outside [0, n) needs n > 0 in
/// every mode but constant.
DPRUN_HOST_DEVICE inline int64_t pad_source(PadMode mode, int64_t i, int64_t n) {
  if (i >= 0 && i < n) return i;
  switch (mode) {
    case PadMode::Constant:
      return -1;
    case PadMode::Edge:
      return i < 0 ? 0 : n - 1;
    case PadMode::Wrap:
      return ((i % n) + n) % n;
    case PadMode::Reflect: {
      if (n == 1) return 0;
      const int64_t period = 2 * (n - 1);
      i = ((i % period) + period) % period;
      return i >= n ? period - i : i;
    }
  }
  return -1;
}

}  // namespace dprun::math
