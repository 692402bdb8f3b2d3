#include "engine/plan_reads.h"

namespace dprun {

namespace {

bool is_string(const Graph& graph, const std::string& value) {
  const auto type = graph.type_of(value);
  return type && type->dtype == DType::String;
}

}  // namespace

std::vector<DeviceRead> device_reads_per_run(const Plan& plan) {
  if (plan.device_type() == DeviceType::CPU) return {};
  const Graph& graph = plan.graph();
  std::vector<bool> on_host(plan.value_count(), false);
  std::vector<DeviceRead> reads;
  for (const PlanStep& step : plan.steps()) {
    const Node& node = graph.nodes[step.node_index];
    const bool host_step = step.kernel_device == DeviceType::CPU;
    for (size_t slot = 0; slot < step.inputs.size(); ++slot) {
      const int id = step.inputs[slot];
      if (id < 0 || on_host[static_cast<size_t>(id)] || step.host_constants.count(slot)) continue;
      // A host step reads every input on the host but those it reads only the dims of
      // (inputs_in_place); a device kernel reads on the host exactly its inputs_in_place.
      const bool in_place = slot < step.inputs_in_place.size() && step.inputs_in_place[slot];
      if (host_step == in_place) continue;
      const std::string& value = plan.value_name(id);
      if (is_string(graph, value)) continue;
      reads.push_back({value, &node, slot, !host_step});
    }
    for (size_t o = 0; o < step.outputs.size(); ++o) {
      const int id = step.outputs[o];
      if (id >= 0 && (step.shape_arithmetic || is_string(graph, plan.value_name(id))))
        on_host[static_cast<size_t>(id)] = true;
    }
  }
  return reads;
}

}  // namespace dprun
