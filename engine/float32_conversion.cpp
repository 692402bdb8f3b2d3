#include "engine/float32_conversion.h"

#include "engine/error.h"
#include "engine/half.h"

namespace dprun {

Tensor to_float32(const Tensor& x) {
  Tensor out = Tensor::empty(x.shape(), DType::Float32);
  float* o = out.data<float>();
  const int64_t n = x.numel();
  if (x.dtype() == DType::Float16)
    widen(x.data<Float16>(), o, n);
  else
    widen(x.data<BFloat16>(), o, n);
  return out;
}

void round_into(const Tensor& x, Tensor& out) {
  DPRUN_CHECK(out.shape() == x.shape(), "round_into: shapes differ");
  const float* v = x.data<float>();
  const int64_t n = x.numel();
  if (out.dtype() == DType::Float16)
    narrow(v, out.data<Float16>(), n);
  else
    narrow(v, out.data<BFloat16>(), n);
}

}  // namespace dprun
