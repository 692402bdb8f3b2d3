#include "loader/external_data_writer.h"

#include "loader/tensor_walk.h"

namespace dprun {

namespace {

constexpr uint64_t kAlignment = 64;

void add_entry(onnx::TensorProto& tensor, const std::string& key, const std::string& value) {
  auto* entry = tensor.add_external_data();
  entry->set_key(key);
  entry->set_value(value);
}

}  // namespace

uint64_t raw_tensor_bytes(const onnx::GraphProto& graph) {
  uint64_t bytes = 0;
  for_each_tensor(graph,
                  [&](const onnx::TensorProto& tensor) { bytes += tensor.raw_data().size(); });
  return bytes;
}

void move_to_external_data(onnx::GraphProto& graph, const std::string& location,
                           AtomicFileWriter& data) {
  // The walk is shared with the readers and visits const tensors; the graph is the caller's
  // own and mutable.
  for_each_tensor(graph, [&](const onnx::TensorProto& visited) {
    auto& tensor = const_cast<onnx::TensorProto&>(visited);
    if (tensor.raw_data().size() < kExternalTensorMinBytes) return;
    const uint64_t padding = (kAlignment - data.size() % kAlignment) % kAlignment;
    data.write(std::string(padding, '\0'));
    const uint64_t offset = data.size();
    data.write(tensor.raw_data());
    add_entry(tensor, "location", location);
    add_entry(tensor, "offset", std::to_string(offset));
    add_entry(tensor, "length", std::to_string(tensor.raw_data().size()));
    tensor.clear_raw_data();
    tensor.set_data_location(onnx::TensorProto::EXTERNAL);
  });
}

}  // namespace dprun
