#include "engine/constant_value.h"

#include <vector>

#include "engine/error.h"

namespace dprun {

Tensor constant_node_value(const Node& n) {
  Tensor value;
  if (n.has_attr("value")) {
    value = n.attr_tensor("value");
  } else if (n.has_attr("value_float")) {
    value = Tensor::scalar<float>(n.attr_float("value_float"));
  } else if (n.has_attr("value_floats")) {
    std::vector<float> v = n.attr_floats("value_floats");
    value = Tensor::from_vector<float>({static_cast<int64_t>(v.size())}, v);
  } else if (n.has_attr("value_int")) {
    value = Tensor::scalar<int64_t>(n.attr_int("value_int"));
  } else if (n.has_attr("value_ints")) {
    std::vector<int64_t> v = n.attr_ints("value_ints");
    value = Tensor::from_vector<int64_t>({static_cast<int64_t>(v.size())}, v);
  } else if (n.has_attr("sparse_value")) {
    n.fail("sparse_value constants are not supported");
  } else if (n.has_attr("value_string") || n.has_attr("value_strings")) {
    n.fail("string constants are not supported");
  } else {
    n.fail("needs one of the attributes value, value_float(s) or value_int(s)");
  }
  if (!value.defined()) n.fail("the value attribute holds no tensor");
  return value;
}

std::map<std::string, Tensor> constant_node_values(const Graph& graph) {
  std::map<std::string, Tensor> values;
  for (const Node& n : graph.nodes) {
    if (n.op_type != "Constant" || !n.domain.empty() || n.outputs.size() != 1 ||
        n.outputs[0].empty())
      continue;
    try {
      values.emplace(n.outputs[0], constant_node_value(n));
    } catch (const Error&) {
      // Left to the Constant kernel, whose factory fails with the same message.
    }
  }
  return values;
}

}  // namespace dprun
