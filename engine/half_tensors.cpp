#include "engine/half_tensors.h"

#include "engine/error.h"
#include "engine/half.h"

namespace dprun {

Tensor to_float32(const Tensor& x) {
  Tensor out = Tensor::empty(x.shape(), DType::Float32);
  float* o = out.data<float>();
  const int64_t n = x.numel();
  if (x.dtype() == DType::Float16) {
    const Float16* h = x.data<Float16>();
    for (int64_t i = 0; i < n; ++i) o[i] = static_cast<float>(h[i]);
  } else {
    const BFloat16* h = x.data<BFloat16>();
    for (int64_t i = 0; i < n; ++i) o[i] = static_cast<float>(h[i]);
  }
  return out;
}

void round_into(const Tensor& x, Tensor& out) {
  DPRUN_CHECK(out.shape() == x.shape(), "round_into: shapes differ");
  const float* v = x.data<float>();
  const int64_t n = x.numel();
  if (out.dtype() == DType::Float16) {
    Float16* h = out.data<Float16>();
    for (int64_t i = 0; i < n; ++i) h[i] = Float16(v[i]);
  } else {
    BFloat16* h = out.data<BFloat16>();
    for (int64_t i = 0; i < n; ++i) h[i] = BFloat16(v[i]);
  }
}

}  // namespace dprun
