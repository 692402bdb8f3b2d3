#include "engine/kernel.h"

#include <algorithm>

namespace dprun {

KernelRegistry& KernelRegistry::instance() {
  static KernelRegistry registry;
  return registry;
}

bool KernelRegistry::add(KernelDef def, const char* source) {
  if (source != nullptr) def.source = source;
  def.domain = canonical_domain(def.domain);
  defs_.push_back(std::move(def));
  if (listeners_.empty()) return true;
  // By index and a copy: a listener may add definitions, which moves defs_ and listeners_.
  const KernelDef added = defs_.back();
  for (size_t l = 0; l < listeners_.size(); ++l) {
    const auto listener = listeners_[l];
    listener(added);
  }
  return true;
}

void KernelRegistry::on_add(std::function<void(const KernelDef&)> listener) {
  listeners_.push_back(listener);
  const size_t existing = defs_.size();  // the later ones reach it through add()
  for (size_t d = 0; d < existing; ++d) {
    const KernelDef def = defs_[d];
    listener(def);
  }
}

bool KernelRegistry::knows_op(const std::string& domain, const std::string& op_type) const {
  std::string d = canonical_domain(domain);
  return std::any_of(defs_.begin(), defs_.end(),
                     [&](const KernelDef& k) { return k.domain == d && k.op_type == op_type; });
}

std::vector<const KernelDef*> KernelRegistry::candidates(const KernelInfo& info, std::string* why,
                                                         const std::string& impl) const {
  const Node& node = info.node;
  std::string domain = canonical_domain(node.domain);
  std::vector<const KernelDef*> versioned;
  for (const auto& def : defs_) {
    if (def.domain != domain || def.op_type != node.op_type || def.device != info.device_type)
      continue;
    if (!impl.empty() && def.impl != impl) continue;
    if (def.since <= info.opset && info.opset <= def.until) versioned.push_back(&def);
  }
  auto set_why = [&](std::string text) {
    if (why) *why = std::move(text);
  };
  if (versioned.empty()) {
    bool any_device = knows_op(domain, node.op_type);
    set_why(any_device ? "no kernel for opset " + std::to_string(info.opset) + " on " +
                             std::string(device_type_name(info.device_type))
                       : "unknown op");
    return {};
  }
  // Highest since first: the newest definition of the op's semantics governs; among those,
  // highest priority (fast paths) first.
  std::stable_sort(versioned.begin(), versioned.end(), [](const KernelDef* a, const KernelDef* b) {
    return a->since != b->since ? a->since > b->since : a->priority > b->priority;
  });
  const int64_t governing_since = versioned.front()->since;
  std::vector<const KernelDef*> accepted;
  std::string rejected_dtype;
  for (const KernelDef* def : versioned) {
    if (def->since != governing_since) break;
    const size_t idx = static_cast<size_t>(def->dtype_input);
    if (!def->dtypes.empty() && idx < info.input_types.size() && info.input_types[idx]) {
      DType t = info.input_types[idx]->dtype;
      if (t != DType::Undefined &&
          std::find(def->dtypes.begin(), def->dtypes.end(), t) == def->dtypes.end()) {
        rejected_dtype = std::string(dtype_name(t));
        continue;
      }
    }
    accepted.push_back(def);
  }
  if (!rejected_dtype.empty()) set_why("no kernel for dtype " + rejected_dtype);
  return accepted;
}

std::unique_ptr<OpKernel> KernelRegistry::create(const KernelInfo& info, std::string* why,
                                                 const std::string& impl,
                                                 const KernelDef** chosen) const {
  std::string reason;  // set when no definition fits, or one was passed over for the dtype
  for (const KernelDef* def : candidates(info, &reason, impl)) {
    if (def->accepts && !def->accepts(info)) continue;
    if (auto kernel = def->factory(info)) {
      if (chosen) *chosen = def;
      return kernel;
    }
  }
  if (why) *why = reason.empty() ? "no kernel accepts this node's attributes" : reason;
  return nullptr;
}

const Tensor& KernelContext::input(size_t i) const {
  if (input_is_sequence(i)) fail("input ", i, " is a sequence where a tensor is expected");
  if (!has_input(i)) fail("required input ", i, " is missing");
  return *inputs_[i];
}

Tensor& KernelContext::allocate_output(size_t i, Shape shape, DType dtype) {
  if (i >= outputs_.size()) fail("output ", i, " does not exist");
  outputs_[i] = Tensor::empty(std::move(shape), dtype, device());
  return outputs_[i];
}

bool KernelContext::input_reusable(size_t input, const Shape& shape, DType dtype) const {
  if (released_inputs_ == nullptr || input >= released_inputs_->size() ||
      !(*released_inputs_)[input] || !has_input(input))
    return false;
  const Tensor& x = *inputs_[input];
  return x.is_sole_owner() && x.dtype() == dtype && dtype != DType::String && x.shape() == shape &&
         x.device() == device();
}

Tensor& KernelContext::allocate_output_reusing(size_t i, size_t input, Shape shape, DType dtype) {
  if (i >= outputs_.size()) fail("output ", i, " does not exist");
  if (!input_reusable(input, shape, dtype)) return allocate_output(i, std::move(shape), dtype);
  outputs_[i] = *inputs_[input];
  return outputs_[i];
}

void KernelContext::set_output(size_t i, Tensor tensor) {
  if (i >= outputs_.size()) fail("output ", i, " does not exist");
  outputs_[i] = std::move(tensor);
}

void KernelContext::set_output_sequence(size_t i, TensorSequence sequence) {
  set_output_sequence(i, std::make_shared<const TensorSequence>(std::move(sequence)));
}

void KernelContext::set_output_sequence(size_t i, SequencePtr sequence) {
  if (i >= outputs_.size()) fail("output ", i, " does not exist");
  if (i >= output_sequences_.size()) fail("output ", i, " cannot hold a sequence here");
  DPRUN_CHECK(sequence != nullptr, "set_output_sequence: null sequence");
  output_sequences_[i] = std::move(sequence);
}

void KernelContext::set_output_none(size_t i) {
  if (i >= outputs_.size()) fail("output ", i, " does not exist");
  if (none_.size() <= i) none_.resize(outputs_.size(), false);
  none_[i] = true;
}

}  // namespace dprun
