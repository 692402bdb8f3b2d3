#include "engine/backends/cuda/nccl_collectives.h"

#include <set>
#include <string>

#include "engine/backends/cuda/cuda_check.h"
#include "engine/backends/cuda/nccl_clique.h"

namespace dprun {

namespace {

// The GPU that holds all of `tensors`; fails naming `what` otherwise.
int list_gpu(const std::vector<Tensor>& tensors, const std::string& what) {
  const Device device = tensors[0].device();
  DPRUN_CHECK(device.type == DeviceType::CUDA, what, ": tensor 0 is on ", device.to_string(),
              ", not on a CUDA GPU");
  for (size_t k = 1; k < tensors.size(); ++k)
    DPRUN_CHECK(tensors[k].device() == device, what, ": tensor ", k, " is on ",
                tensors[k].device().to_string(), " but tensor 0 on ", device.to_string());
  return device.index;
}

void check_distinct(const std::vector<int>& gpus, const char* op) {
  std::set<int> seen;
  for (int g : gpus)
    DPRUN_CHECK(seen.insert(g).second, op, ": cuda:", g, " is listed twice; NCCL needs a ",
                "different GPU for each list");
}

void check_like(const Tensor& t, const Tensor& reference, const std::string& what) {
  DPRUN_CHECK(t.shape() == reference.shape() && t.dtype() == reference.dtype(), what, " is ",
              t.describe(), " but should be like ", reference.describe());
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
  std::vector<int> gpus = {list_gpu(sources, "broadcast_coalesced: the sources")};
  for (size_t k = 0; k < sources.size(); ++k)
    DPRUN_CHECK(sources[k].dtype() != DType::String, "broadcast_coalesced: tensor ", k, " is ",
                sources[k].describe(), "; NCCL copies tensors of fixed-size elements only");
  for (size_t d = 0; d < destinations.size(); ++d) {
    const std::string list = "broadcast_coalesced: destination list " + std::to_string(d);
    DPRUN_CHECK(destinations[d].size() == sources.size(), list, " has ", destinations[d].size(),
                " tensors for ", sources.size(), " sources");
    gpus.push_back(list_gpu(destinations[d], list));
    for (size_t k = 0; k < sources.size(); ++k)
      check_like(destinations[d][k], sources[k], list + ", tensor " + std::to_string(k) + ",");
  }
  check_distinct(gpus, "broadcast_coalesced");
  std::shared_ptr<NcclClique> clique = nccl_clique(gpus);
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
}

void nccl_reduce_add_coalesced(const std::vector<std::vector<Tensor>>& inputs,
                               const std::vector<Tensor>& outputs) {
  if (outputs.empty()) return;
  DPRUN_CHECK(!inputs.empty(), "reduce_add_coalesced: no input lists");
  const int out_gpu = list_gpu(outputs, "reduce_add_coalesced: the outputs");
  std::vector<ncclDataType_t> types;
  for (const Tensor& t : outputs) types.push_back(nccl_sum_type(t.dtype()));
  std::vector<int> gpus;
  int root = -1;
  for (size_t d = 0; d < inputs.size(); ++d) {
    const std::string list = "reduce_add_coalesced: input list " + std::to_string(d);
    DPRUN_CHECK(inputs[d].size() == outputs.size(), list, " has ", inputs[d].size(),
                " tensors for ", outputs.size(), " outputs");
    gpus.push_back(list_gpu(inputs[d], list));
    if (gpus.back() == out_gpu) root = static_cast<int>(d);
    for (size_t k = 0; k < outputs.size(); ++k)
      check_like(inputs[d][k], outputs[k], list + ", tensor " + std::to_string(k) + ",");
  }
  check_distinct(gpus, "reduce_add_coalesced");
  DPRUN_CHECK(root >= 0, "reduce_add_coalesced: the outputs are on cuda:", out_gpu,
              ", which holds none of the input lists");
  if (inputs.size() == 1) {
    for (size_t k = 0; k < outputs.size(); ++k) {
      Tensor out = outputs[k];
      out.copy_from(inputs[0][k]);
    }
    return;
  }
  std::shared_ptr<NcclClique> clique = nccl_clique(gpus);
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
}

}  // namespace dprun
