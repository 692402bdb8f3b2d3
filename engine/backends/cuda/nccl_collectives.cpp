#include "engine/backends/cuda/nccl_collectives.h"

#include <string>

#include "engine/backends/cuda/cuda_check.h"
#include "engine/backends/cuda/nccl_clique.h"
#include "engine/collective_lists.h"
#include "engine/stream_order.h"

namespace dprun {

namespace {

std::vector<int> indices(const std::vector<Device>& devices) {
  std::vector<int> out;
  for (const Device& d : devices) out.push_back(d.index);
  return out;
}

}  // namespace

ncclDataType_t nccl_sum_type(DType dtype) {
  switch (dtype) {
    case DType::Float32:
      return ncclFloat32;
    case DType::Float64:
      return ncclFloat64;
    case DType::Float16:
      return ncclFloat16;
    case DType::BFloat16:
      return ncclBfloat16;
    default:
      fail("reduce_add on CUDA GPUs: NCCL sums float32, float64, float16 and bfloat16 tensors, ",
           "not ", dtype_name(dtype));
  }
}

void nccl_broadcast_coalesced(const std::vector<Tensor>& sources,
                              const std::vector<std::vector<Tensor>>& destinations) {
  if (sources.empty() || destinations.empty()) return;
  const std::vector<int> gpus = indices(broadcast_devices(sources, destinations, DeviceType::CUDA));
  for (size_t k = 0; k < sources.size(); ++k)
    DPRUN_CHECK(sources[k].dtype() != DType::String, "broadcast_coalesced: tensor ", k, " is ",
                sources[k].describe(), "; NCCL copies tensors of fixed-size elements only");
  std::shared_ptr<NcclClique> clique = nccl_clique(gpus);
  CollectiveOrder order(sources, destinations);
  clique->run("broadcast_coalesced from cuda:" + std::to_string(gpus[0]), [&](int rank) {
    for (size_t k = 0; k < sources.size(); ++k) {
      if (sources[k].nbytes() == 0) continue;
      // In place on every rank: the root sends its own tensor, the others receive into theirs.
      Tensor buffer = rank == 0 ? sources[k] : destinations[static_cast<size_t>(rank) - 1][k];
      void* data = buffer.raw_data();
      nccl_check(ncclBroadcast(data, data, buffer.nbytes(), ncclUint8, 0, clique->comm(rank),
                               clique->stream(rank)),
                 "broadcast_coalesced over ", clique->name(), ": cuda:", clique->device(rank),
                 ": ncclBroadcast of tensor ", k, " (", buffer.describe(), ")");
    }
  });
  order.done();
}

void nccl_reduce_add_coalesced(const std::vector<std::vector<Tensor>>& inputs,
                               const std::vector<Tensor>& outputs) {
  if (outputs.empty()) return;
  const ReduceDevices lists = reduce_add_devices(inputs, outputs, DeviceType::CUDA);
  const std::vector<int> gpus = indices(lists.inputs);
  const int root = static_cast<int>(lists.root);
  const int out_gpu = gpus[lists.root];
  std::vector<ncclDataType_t> types;
  for (const Tensor& t : outputs) types.push_back(nccl_sum_type(t.dtype()));
  if (inputs.size() == 1) {
    for (size_t k = 0; k < outputs.size(); ++k) {
      Tensor out = outputs[k];
      out.copy_from(inputs[0][k]);
    }
    return;
  }
  std::shared_ptr<NcclClique> clique = nccl_clique(gpus);
  CollectiveOrder order(outputs, inputs);
  clique->run("reduce_add_coalesced onto cuda:" + std::to_string(out_gpu), [&](int rank) {
    const auto& mine = inputs[static_cast<size_t>(rank)];
    for (size_t k = 0; k < outputs.size(); ++k) {
      if (outputs[k].numel() == 0) continue;
      Tensor out = outputs[k];
      void* receive = rank == root ? out.raw_data() : nullptr;
      nccl_check(ncclReduce(mine[k].raw_data(), receive, static_cast<size_t>(outputs[k].numel()),
                            types[k], ncclSum, root, clique->comm(rank), clique->stream(rank)),
                 "reduce_add_coalesced over ", clique->name(), ": cuda:", clique->device(rank),
                 ": ncclReduce of tensor ", k, " (", mine[k].describe(), ")");
    }
  });
  order.done();
}

}  // namespace dprun
