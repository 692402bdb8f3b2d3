#pragma once
// Visiting every tensor a graph holds: initializers, tensors in node attributes, and those of
// subgraphs (If/Loop/Scan bodies), recursively.
#include <onnx/onnx_pb.h>

namespace dprun {

template <class Visit>
void for_each_tensor(const onnx::GraphProto& graph, const Visit& visit) {
  for (const auto& tensor : graph.initializer()) visit(tensor);
  for (const auto& node : graph.node())
    for (const auto& attribute : node.attribute()) {
      if (attribute.has_t()) visit(attribute.t());
      for (const auto& tensor : attribute.tensors()) visit(tensor);
      if (attribute.has_g()) for_each_tensor(attribute.g(), visit);
      for (const auto& body : attribute.graphs()) for_each_tensor(body, visit);
    }
}

}  // namespace dprun
