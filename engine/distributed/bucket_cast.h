#pragma once
// Gradient buckets sent in 16 bits (ReducerOptions::wire_dtype, PyTorch's bf16_compress_hook
// and fp16_compress_hook): a float32 bucket is rounded to float16 or bfloat16 before its
// all-reduce and widened back after it, where the bucket lives, by that device's Cast kernel.
#include "engine/tensor.h"

namespace dprun {

/// `from` converted to `dtype` (float32, float16 or bfloat16) in from's memory (the host, or
/// one device) by the device's Cast kernel, rounding to nearest even as Cast does. On a device
/// it first waits for the device's queued work (whatever wrote `from`); it returns when the
/// conversion is done. Throws Error when the device has no Cast kernel for the types.
Tensor cast_bucket(const Tensor& from, DType dtype);

}  // namespace dprun
