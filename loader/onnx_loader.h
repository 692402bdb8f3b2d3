#pragma once
// ONNX model files <-> Graph. The only place protobuf and onnx:: types are used.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "engine/graph.h"
#include "engine/model.h"

namespace dprun {

struct LoadOptions {
  bool run_checker = true;          // onnx::checker::check_model
  bool run_shape_inference = true;  // onnx::shape_inference, fills Graph::value_types
};

/// Parses, checks and converts an ONNX model file. External data files are resolved relative
/// to the model's folder. Throws Error naming the file (and node/op where relevant) for a
/// missing or unreadable file, a non-ONNX or truncated protobuf, a checker failure, a cycle,
/// or missing external data. The graph is topologically sorted.
std::shared_ptr<Graph> load_graph(const std::string& path, const LoadOptions& options = {});
/// Same, from an in-memory serialized ModelProto; `base_dir` resolves external data.
std::shared_ptr<Graph> load_graph_from_buffer(const void* data, size_t size,
                                              const std::string& base_dir = "",
                                              const LoadOptions& options = {});
/// load_graph, then place the model on `device` (its parameters live there) and compile it
/// with `model_options`. Every node without a kernel on that device is reported at once.
Model load_model(const std::string& path, Device device = Device::cpu(),
                 const LoadOptions& options = {}, const ModelOptions& model_options = {});

/// How a model is written.
struct SaveOptions {
  /// When the model's tensors hold more bytes than this, each tensor of 1 KiB or more is
  /// written to an external data file beside the model, named after it (OUT.onnx ->
  /// OUT.onnx.data), as onnx.save_model(..., save_as_external_data=True) does; dprun, ONNX
  /// Runtime and onnx.load read it back. The default keeps the model file inside protobuf's
  /// 2 GiB limit.
  uint64_t external_data_threshold = 2'000'000'000;
};

/// The external data file save_graph writes beside `path` when it writes one.
std::string external_data_path(const std::string& path);

/// Serializes `graph` to ONNX with the given parameter values in place of its initializers
/// (names must match). Every file is written to a temporary file and renamed into place (the
/// external data file first, then the model), so a failure leaves no half-written file.
void save_graph(const Graph& graph, const std::map<std::string, Tensor>& parameters,
                const std::string& path, const SaveOptions& options = {});
/// Saves a model with its current parameter values.
void save_model(const Model& model, const std::string& path, const SaveOptions& options = {});
/// Saves the inference form of a model (engine/autograd/inference_graph.h: BatchNormalization
/// on its running statistics, Dropout as Identity) with its current parameter values: the
/// model to serve after training.
void save_inference_model(const Model& model, const std::string& path,
                          const SaveOptions& options = {});

}  // namespace dprun

namespace dprun {

/// Reads a serialized onnx TensorProto file (the .pb files of the ONNX test data). Throws
/// Error naming the file when it is missing, malformed, or not a tensor (e.g. a sequence).
Tensor read_tensor_proto_file(const std::string& path);

}  // namespace dprun
