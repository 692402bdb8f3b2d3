#pragma once
// Float16 and bfloat16 tensors in and out of float32, for CPU kernels that compute 16-bit
// values on a float32 path: one rounding per element, to nearest even (engine/half.h), as Cast
// rounds.
#include "engine/kernel.h"
#include "engine/tensor.h"

namespace dprun {

/// True for float16 and bfloat16.
bool is_16bit(DType t);
/// A float32 copy of `x`, a host float16 or bfloat16 tensor.
Tensor to_float32(const Tensor& x);
/// Rounds the host float32 tensor `x` into `out`, a float16 or bfloat16 tensor of x's shape.
void round_into(const Tensor& x, Tensor& out);
/// Runs `kernel`, a kernel that takes float32, on float32 copies of ctx's 16-bit inputs (other
/// inputs as they are), and sets each float32 output of ctx to that output rounded to
/// `dtype`: the 16-bit node computed in float32 and rounded once. For work a 16-bit fast path
/// does not cover.
void run_in_float32(const OpKernel& kernel, KernelContext& ctx, DType dtype);

}  // namespace dprun
