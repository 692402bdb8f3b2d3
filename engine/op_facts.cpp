#include "engine/op_facts.h"

#include <cstring>

namespace dprun {

bool OutputDTypeRule::operator==(const OutputDTypeRule& other) const {
  const bool same_attribute =
      (attribute == nullptr) == (other.attribute == nullptr) &&
      (attribute == nullptr || std::strcmp(attribute, other.attribute) == 0);
  return kind == other.kind && input == other.input && dtype == other.dtype && same_attribute;
}

std::optional<DType> first_present_input_dtype(const Node& node, size_t from,
                                               const InputDType& input_dtype) {
  for (size_t i = from; i < node.inputs.size(); ++i)
    if (!node.inputs[i].empty()) return input_dtype(i);
  return std::nullopt;
}

std::optional<DType> OpFacts::output_dtype(const Node& node, size_t output,
                                           const InputDType& input_dtype) const {
  if (dtype_function != nullptr) return dtype_function(node, output, input_dtype);
  using Kind = OutputDTypeRule::Kind;
  switch (dtype.kind) {
    case Kind::Fixed:
      return dtype.dtype;
    case Kind::FixedAfterFirst:
      if (output > 0) return dtype.dtype;
      break;
    case Kind::FromAttribute:
      if (node.has_attr(dtype.attribute)) return static_cast<DType>(node.attr_int(dtype.attribute));
      if (dtype.dtype != DType::Undefined) return dtype.dtype;
      break;
    case Kind::Unknown:
      return std::nullopt;
    case Kind::SameAsInput:
      break;
  }
  return first_present_input_dtype(node, static_cast<size_t>(dtype.input), input_dtype);
}

OpFactsRegistry& OpFactsRegistry::instance() {
  static OpFactsRegistry registry;
  return registry;
}

bool OpFactsRegistry::add(OpFacts facts, const char* source) {
  if (source != nullptr) facts.source = source;
  facts.domain = canonical_domain(facts.domain);
  auto key = std::make_pair(facts.domain, facts.op_type);
  if (!facts_.emplace(key, std::move(facts)).second)
    duplicates_.push_back((key.first.empty() ? std::string("ai.onnx") : key.first) + " " +
                          key.second);
  return true;
}

const OpFacts* OpFactsRegistry::find(const std::string& domain, const std::string& op_type) const {
  auto it = facts_.find(std::make_pair(canonical_domain(domain), op_type));
  return it == facts_.end() ? nullptr : &it->second;
}

const OpFacts& OpFactsRegistry::get(const std::string& domain, const std::string& op_type) const {
  static const OpFacts defaults;
  const OpFacts* facts = find(domain, op_type);
  return facts != nullptr ? *facts : defaults;
}

std::vector<const OpFacts*> OpFactsRegistry::definitions() const {
  std::vector<const OpFacts*> all;
  for (const auto& [key, facts] : facts_) all.push_back(&facts);
  return all;
}

const OpFacts& op_facts(const Node& node) {
  return OpFactsRegistry::instance().get(node.domain, node.op_type);
}

}  // namespace dprun
