#include "engine/distributed/bucket_cast.h"

#include "engine/backend.h"
#include "engine/kernel.h"

namespace dprun {

Tensor cast_bucket(const Tensor& from, DType dtype) {
  Node node;
  node.name = "gradient bucket cast";
  node.op_type = "Cast";
  node.inputs = {"bucket"};
  node.outputs = {"cast"};
  node.attributes["to"] = Attribute::of_int(static_cast<int64_t>(dtype));
  const Device device = from.device();
  SymbolicShape shape;
  for (int64_t d : from.shape()) shape.push_back(Dim::known(d));
  KernelInfo info{.node = node, .opset = 13, .device_type = device.type};  // Cast-13: bfloat16
  info.input_types.push_back(TensorType{from.dtype(), shape});
  std::string why;
  std::unique_ptr<OpKernel> kernel = KernelRegistry::instance().create(info, &why);
  if (!kernel)
    fail("gradient compression: no Cast from ", dtype_name(from.dtype()), " to ", dtype_name(dtype),
         " on ", device.to_string(), " (", why, ")");
  Backend& backend = backend_for(device);
  // The bucket was written by copies queued on other streams of the device (mark_ready), inside
  // runs whose hand-over does not name the bucket, so it carries no event: the cast, on a stream
  // of its own, reads it once the host has waited for them.
  if (device.type != DeviceType::CPU) backend.synchronize(device);
  std::unique_ptr<ExecutionContext> context = backend.create_execution_context(device, {});
  const Tensor* inputs[] = {&from};
  Tensor outputs[1];
  KernelContext ctx(node, *context, inputs, outputs);
  kernel->compute(ctx);
  // The process group orders its stream after the caller's current stream, not after this
  // context's: the host waits before the cast bucket is handed to it.
  context->synchronize();
  return outputs[0];
}

}  // namespace dprun
