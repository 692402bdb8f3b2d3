#include "engine/parallel/replicate.h"

namespace dprun {

std::vector<std::shared_ptr<Model>> replicate(const Model& model,
                                              const std::vector<Device>& devices) {
  DPRUN_CHECK(!devices.empty(), "replicate: no devices given");
  DPRUN_CHECK(model.device() == devices[0], "replicate: the model is on ",
              model.device().to_string(), ", not on devices[0] (", devices[0].to_string(), ")");
  std::vector<std::shared_ptr<Model>> replicas;
  replicas.push_back(std::make_shared<Model>(model.plan(), devices[0], model.parameters(),
                                             model.shared_version(), model.graph_ptr()));
  std::shared_ptr<const Plan> other_type_plan;
  for (size_t i = 1; i < devices.size(); ++i) {
    std::shared_ptr<const Plan> plan = model.plan();
    if (devices[i].type != model.device().type) {
      if (!other_type_plan || other_type_plan->device_type() != devices[i].type)
        // From the original graph: the CPU layout rewrite has no kernels elsewhere. Both
        // plans order parameters by initializer name, so the parameter lists line up.
        other_type_plan = Plan::build(model.graph_ptr(), devices[i].type);
      plan = other_type_plan;
    }
    std::vector<Tensor> params;
    params.reserve(model.parameters().size());
    for (const Tensor& p : model.parameters()) params.push_back(p.to(devices[i], /*copy=*/true));
    replicas.push_back(
        std::make_shared<Model>(plan, devices[i], std::move(params), nullptr, model.graph_ptr()));
  }
  return replicas;
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
}

}  // namespace dprun
