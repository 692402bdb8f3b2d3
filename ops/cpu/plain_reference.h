#pragma once
// The reference kernel of the plain ai.onnx op that a node of the CPU rewrites' "dprun" domain
// stands for (ConvNHWC for Conv, MatMulBias for MatMul, FusedGemm for Gemm, ...): the NHWC and
// fused kernels run it where oneDNN cannot, so every rewritten node keeps a reference.
#include <algorithm>
#include <memory>
#include <string>

#include "engine/kernel.h"

namespace dprun {

/// Builds `plain` from the rewritten node (op `op`, domain ai.onnx, its first `inputs` inputs,
/// without the rewrites' activation attributes) and returns its reference kernel at the model's
/// ai.onnx opset (outside a model, where KernelInfo::graph is null, at info.opset: the caller's).
/// The kernel refers to `plain`, which must outlive it. `input0_type_known` false drops input 0's
/// type (an NHWC twin's type is not the plain op's). Fails naming the rewritten node when there is
/// no reference kernel.
inline std::unique_ptr<OpKernel> plain_reference(const KernelInfo& info, Node& plain,
                                                 const std::string& op, size_t inputs,
                                                 bool input0_type_known = true) {
  plain = info.node;
  plain.op_type = op;
  plain.domain = "";
  for (const char* attr : {"activation", "activation_min", "activation_max"})
    plain.attributes.erase(attr);
  plain.inputs.resize(std::min(plain.inputs.size(), inputs));
  const int64_t opset = info.graph ? info.graph->opset("") : info.opset;
  KernelInfo plain_info{plain,
                        opset,
                        info.device_type,
                        info.input_types,
                        info.constant_inputs,
                        info.graph,
                        info.implicit_inputs};
  plain_info.input_types.resize(plain.inputs.size());
  if (!input0_type_known && !plain_info.input_types.empty()) plain_info.input_types[0].reset();
  std::string why;
  auto kernel = KernelRegistry::instance().create(plain_info, &why, "reference");
  if (!kernel) info.node.fail("no ", op, " reference kernel: ", why);
  return kernel;
}

}  // namespace dprun
