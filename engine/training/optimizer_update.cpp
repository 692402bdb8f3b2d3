#include "engine/training/optimizer_update.h"

#include "engine/backend.h"
#include "engine/stream_order.h"

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

void for_each_memory(
    const std::vector<Tensor>& tensors, const std::vector<const std::vector<Tensor>*>& with,
    const std::function<void(Device, ExecutionContext*, const std::vector<size_t>&)>& fn) {
  // Device::cpu() sorts before every accelerator: the host goes first.
  std::map<Device, std::vector<size_t>> by_memory;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Device d = tensors[i].device();
    by_memory[d.type == DeviceType::CPU ? Device::cpu() : d].push_back(i);
  }
  for (const auto& [memory, indices] : by_memory) {
    if (memory.type == DeviceType::CPU) {
      fn(memory, nullptr, indices);
      continue;
    }
    std::unique_ptr<ExecutionContext> context =
        backend_for(memory).create_execution_context(memory, {});
    // The tensors come from runs, collectives and copies on other streams: wait for their
    // events, then hand them on with one of this stream's.
    std::vector<const Tensor*> used;
    for (size_t i : indices) {
      used.push_back(&tensors[i]);
      for (const std::vector<Tensor>* list : with)
        if (i < list->size()) used.push_back(&(*list)[i]);
    }
    for (const Tensor* t : used) use_on_stream(*t, memory, StreamWait::Handover);
    fn(memory, context.get(), indices);
    hand_over(used, memory);
  }
}

bool scale_gradients(const std::vector<Tensor>& gradients, double factor,
                     UpdateKernelCache<GradientScaleKernel>& kernels) {
  bool found_inf = false;
  for_each_memory(
      gradients, {},
      [&](Device memory, ExecutionContext* execution, const std::vector<size_t>& indices) {
        Tensor flag = Tensor::zeros({1}, DType::Float32, memory);
        for (size_t i : indices) {
          Tensor g = gradients[i];  // a handle on the caller's storage
          kernels.get(memory.type, g.dtype()).scale(execution, factor, g, flag);
        }
        // The host reads the flag next (the copy below waits too; this names why).
        if (execution) execution->synchronize();
        found_inf = found_inf || flag.to(Device::cpu()).data<float>()[0] != 0;
      });
  return !found_inf;
}

}  // namespace dprun
