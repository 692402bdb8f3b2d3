#pragma once
// CPU kernels that compute 16-bit values on their float32 path: the node's 16-bit inputs
// widened, its float32 results rounded once (engine/float32_conversion.h).
#include "engine/float32_conversion.h"
#include "engine/kernel.h"

namespace dprun {

/// Runs `kernel`, a kernel that takes float32, on float32 copies of ctx's 16-bit inputs (other
/// inputs as they are), and sets each float32 output of ctx to that output rounded to
/// `dtype`: the 16-bit node computed in float32 and rounded once. For work a 16-bit fast path
/// does not cover.
void run_in_float32(const OpKernel& kernel, KernelContext& ctx, DType dtype);

}  // namespace dprun
