#include "ops/cpu/half_tensors.h"

#include "engine/error.h"
#include "engine/half.h"

#include <vector>

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

bool is_16bit(DType t) {
  return t == DType::Float16 || t == DType::BFloat16;
}

void run_in_float32(const OpKernel& kernel, KernelContext& ctx, DType dtype) {
  std::vector<Tensor> wide(ctx.input_count());
  std::vector<const Tensor*> inputs(ctx.input_count(), nullptr);
  for (size_t i = 0; i < ctx.input_count(); ++i) {
    const Tensor* in = ctx.optional_input(i);
    if (in == nullptr) continue;
    wide[i] = is_16bit(in->dtype()) ? to_float32(*in) : *in;
    inputs[i] = &wide[i];
  }
  std::vector<Tensor> outputs(ctx.output_count());
  KernelContext float32(ctx.node(), ctx.execution(), inputs, outputs);
  kernel.compute(float32);
  for (size_t o = 0; o < outputs.size(); ++o) {
    if (!outputs[o].defined()) continue;
    if (outputs[o].dtype() != DType::Float32) {
      ctx.set_output(o, outputs[o]);
      continue;
    }
    round_into(outputs[o], ctx.allocate_output(o, outputs[o].shape(), dtype));
  }
}

}  // namespace dprun
