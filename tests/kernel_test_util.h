#pragma once
// Runs one node through a chosen kernel implementation ("reference", "onednn", ...) directly,
// bypassing the plan, so fast paths can be compared with the reference kernel.
#include <string>
#include <vector>

#include "engine/backend.h"
#include "engine/kernel.h"

namespace dprun::testing {

/// An execution context of cpu:0 with `threads` intra-op threads, bound to the calling thread
/// until it is destroyed.
inline std::unique_ptr<ExecutionContext> cpu_execution(int threads) {
  return backend_for(DeviceType::CPU).create_execution_context(Device::cpu(), {.threads = threads});
}

/// Builds the `impl` kernel for `node` at `opset` (input types taken from `inputs`; empty
/// node input names are omitted inputs) with `plan` as its plan options, and runs it once with
/// `threads` intra-op threads. Throws Error when no such kernel accepts the node.
inline std::vector<Tensor> run_impl(const Node& node, const std::vector<Tensor>& inputs,
                                    int64_t opset, const std::string& impl, int threads = 1,
                                    const PlanOptions& plan = {}) {
  KernelInfo info{node, opset, DeviceType::CPU, {}, {}};
  info.plan_options = plan;
  std::vector<const Tensor*> ptrs;
  size_t fed = 0;
  for (const auto& name : node.inputs) {
    if (name.empty()) {
      info.input_types.push_back(std::nullopt);
      ptrs.push_back(nullptr);
      continue;
    }
    DPRUN_CHECK(fed < inputs.size(), "run_impl: too few inputs");
    const Tensor& t = inputs[fed++];
    SymbolicShape shape;
    for (int64_t d : t.shape()) shape.push_back(Dim::known(d));
    info.input_types.push_back(TensorType{t.dtype(), shape});
    ptrs.push_back(&t);
  }
  std::string why;
  auto kernel = KernelRegistry::instance().create(info, &why, impl);
  DPRUN_CHECK(kernel != nullptr, "no '", impl, "' kernel for ", node.op_type, ": ", why);
  std::vector<Tensor> outputs(node.outputs.size());
  std::unique_ptr<ExecutionContext> execution = cpu_execution(threads);
  KernelContext ctx(node, *execution, ptrs, outputs);
  std::vector<bool> wanted;
  for (const auto& name : node.outputs) wanted.push_back(!name.empty());
  ctx.set_wanted(wanted);
  kernel->compute(ctx);
  return outputs;
}

}  // namespace dprun::testing
