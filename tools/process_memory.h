#pragma once
// The process's resident memory, from Linux's /proc/self: what `dprun train --json` reports as
// the memory a run took (peak_resident_bytes), measured the way bench/peers/train_vs_torch.py
// measures PyTorch's.
#include <cstdint>

namespace dprun::cli {

/// Resident memory now (VmRSS), in bytes; 0 where /proc/self/statm cannot be read.
int64_t resident_bytes();

/// The highest resident memory so far (VmHWM), in bytes; 0 where /proc/self/status cannot be
/// read.
int64_t peak_resident_bytes();

}  // namespace dprun::cli
