#include "engine/parallel/replicate.h"

#include <cstring>

#include "engine/parallel/comm.h"
#include "engine/parallel/run_in_parts.h"

namespace dprun {

std::vector<std::shared_ptr<Model>> replicate(const Model& model,
                                              const std::vector<Device>& devices) {
  DPRUN_CHECK(!devices.empty(), "replicate: no devices given");
  DPRUN_CHECK(model.device() == devices[0], "replicate: the model is on ",
              model.device().to_string(), ", not on devices[0] (", devices[0].to_string(), ")");
  std::vector<std::shared_ptr<Model>> replicas;
  replicas.push_back(std::make_shared<Model>(model.plan(), devices[0], model.parameters(),
                                             model.shared_version(), model.graph_ptr(),
                                             model.rewrite_options()));
  // The devices of the base's type get their copies from one broadcast_coalesced (a single
  // collective between GPUs); devices of another type, tensor by tensor.
  std::vector<Device> same_type;
  for (size_t i = 1; i < devices.size(); ++i)
    if (devices[i].type == model.device().type) same_type.push_back(devices[i]);
  std::vector<std::vector<Tensor>> broadcast = broadcast_coalesced(model.parameters(), same_type);
  size_t next_broadcast = 0;
  std::shared_ptr<const Plan> other_type_plan;
  for (size_t i = 1; i < devices.size(); ++i) {
    std::shared_ptr<const Plan> plan = model.plan();
    std::vector<Tensor> params;
    if (devices[i].type == model.device().type) {
      params = std::move(broadcast[next_broadcast++]);
    } else {
      if (!other_type_plan || other_type_plan->device_type() != devices[i].type)
        // The original graph as that device's backend rewrites it (its fusions and 16-bit
        // passes, not the base's). Rewrites keep the initializers, and both plans order
        // parameters by initializer name, so the parameter lists line up.
        other_type_plan = model.plan_for(devices[i]);
      plan = other_type_plan;
      params.reserve(model.parameters().size());
      for (const Tensor& p : model.parameters()) params.push_back(p.to(devices[i], /*copy=*/true));
    }
    replicas.push_back(std::make_shared<Model>(plan, devices[i], std::move(params), nullptr,
                                               model.graph_ptr(), model.rewrite_options()));
  }
  return replicas;
}

void refresh_replicas(const Model& base, const std::vector<Model*>& replicas,
                      const std::vector<Device>& workers) {
  const auto& src = base.parameters();
  std::vector<Model*> copies;        // host replicas that share no storage with the base
  std::vector<Model*> broadcast_to;  // GPU replicas of the base's type: one broadcast_coalesced
  for (Model* replica : replicas) {
    DPRUN_CHECK(replica->parameters().size() == src.size(),
                "refresh_replica: parameter lists differ");
    bool host = replica->device().type == DeviceType::CPU;
    for (size_t i = 0; i < src.size() && host; ++i) host = src[i].dtype() != DType::String;
    if (host) {
      copies.push_back(replica);
    } else if (replica->device().type == base.device().type && replica->device() != base.device()) {
      broadcast_to.push_back(replica);
    } else {  // std::string elements, or a device of another type: tensor by tensor
      refresh_replica(base, *replica);
    }
  }
  if (!broadcast_to.empty()) {
    std::vector<std::vector<Tensor>> destinations;
    for (Model* replica : broadcast_to) destinations.push_back(replica->parameters());
    broadcast_coalesced_into(src, destinations);
    for (Model* replica : broadcast_to) mark_replica_written(base, *replica);
  }
  if (copies.empty() || base.device().type != DeviceType::CPU) {
    for (Model* replica : copies) refresh_replica(base, *replica);
    return;
  }
  // Byte ranges of every parameter, split over the workers.
  std::vector<int64_t> bytes;
  int64_t total = 0;
  for (const Tensor& p : src) {
    bytes.push_back(static_cast<int64_t>(p.nbytes()));
    total += bytes.back();
  }
  run_in_parts(workers, total, int64_t(1) << 17, [&](int64_t begin, int64_t end) {
    for_each_piece(bytes, begin, end, [&](size_t i, int64_t first, int64_t last) {
      const char* from = static_cast<const char*>(src[i].raw_data()) + first;
      for (Model* replica : copies) {
        Tensor dst = replica->parameters()[i];  // a handle on the replica's storage
        if (dst.shares_storage_with(src[i])) continue;
        DPRUN_CHECK(dst.nbytes() == src[i].nbytes(), "refresh_replica: parameter ", i, " is ",
                    dst.describe(), " on the replica but ", src[i].describe(), " on the base");
        std::memcpy(static_cast<char*>(dst.raw_data()) + first, from,
                    static_cast<size_t>(last - first));
      }
    });
  });
  for (Model* replica : copies) mark_replica_written(base, *replica);
}

void refresh_replica(const Model& base, Model& replica) {
  const auto& src = base.parameters();
  const auto& dst = replica.parameters();
  DPRUN_CHECK(src.size() == dst.size(), "refresh_replica: parameter lists differ");
  for (size_t i = 0; i < src.size(); ++i) {
    if (src[i].shares_storage_with(dst[i])) continue;
    Tensor target = dst[i];
    target.copy_from(src[i]);
  }
  mark_replica_written(base, replica);
}

void mark_replica_written(const Model& base, const Model& replica) {
  if (replica.shared_version() != base.shared_version()) replica.mark_parameters_changed();
}

}  // namespace dprun
