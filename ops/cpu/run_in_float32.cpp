#include "ops/cpu/run_in_float32.h"

#include <vector>

namespace dprun {

void run_in_float32(const OpKernel& kernel, KernelContext& ctx, DType dtype) {
  std::vector<Tensor> wide(ctx.input_count());
  std::vector<const Tensor*> inputs(ctx.input_count(), nullptr);
  for (size_t i = 0; i < ctx.input_count(); ++i) {
    const Tensor* in = ctx.optional_input(i);
    if (in == nullptr) continue;
    wide[i] = is_16bit_float(in->dtype()) ? to_float32(*in) : *in;
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
