#include "engine/autograd/optimizer_update.h"

namespace dprun {

void ParameterUpdateKernel::compute(KernelContext& ctx) const {
  ctx.fail("this update belongs to dprun's optimizers and does not run in a graph");
}

std::unique_ptr<OpKernel> create_update_kernel(const char* op_type, DeviceType device,
                                               DType dtype) {
  Node node;
  node.name = op_type;
  node.op_type = op_type;
  node.domain = kDprunDomain;
  KernelInfo info{.node = node, .opset = 1, .device_type = device};
  info.input_types.push_back(TensorType{dtype, std::nullopt});
  std::string why;
  std::unique_ptr<OpKernel> kernel = KernelRegistry::instance().create(info, &why);
  if (!kernel)
    fail("optimizer: no ", op_type, " kernel for ", dtype_name(dtype), " on ",
         device_type_name(device), " (", why, ")");
  return kernel;
}

}  // namespace dprun
