#pragma once
// Float16 and bfloat16 host tensors in and out of float32: one rounding per element, to nearest
// even (engine/half.h), as Cast rounds.
#include "engine/tensor.h"

namespace dprun {

/// A float32 copy of `x`, a host float16 or bfloat16 tensor.
Tensor to_float32(const Tensor& x);
/// Rounds the host float32 tensor `x` into `out`, a float16 or bfloat16 tensor of x's shape.
void round_into(const Tensor& x, Tensor& out);

}  // namespace dprun
