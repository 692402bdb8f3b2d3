#include "engine/autograd/gradient_registry.h"

#include <algorithm>

#include "engine/graph.h"

namespace dprun {

GradientRegistry& GradientRegistry::instance() {
  static GradientRegistry registry;
  return registry;
}

bool GradientRegistry::add(GradientDef def, const char* source) {
  if (source != nullptr) def.source = source;
  DPRUN_CHECK(def.rule != nullptr, "gradient rule for ", def.op_type, " has no function");
  def.domain = canonical_domain(def.domain);
  defs_.push_back(std::move(def));
  return true;
}

const GradientDef* GradientRegistry::find(const std::string& domain, const std::string& op_type,
                                          int64_t opset) const {
  std::string d = canonical_domain(domain);
  const GradientDef* best = nullptr;
  for (const auto& def : defs_)
    if (def.domain == d && def.op_type == op_type && def.since <= opset && opset <= def.until &&
        (best == nullptr || def.since > best->since))
      best = &def;
  return best;
}

bool GradientRegistry::knows_op(const std::string& domain, const std::string& op_type) const {
  std::string d = canonical_domain(domain);
  return std::any_of(defs_.begin(), defs_.end(),
                     [&](const GradientDef& g) { return g.domain == d && g.op_type == op_type; });
}

}  // namespace dprun
