#include "loader/onnx_loader.h"

#include <onnx/checker.h>
#include <onnx/defs/schema.h>
#include <onnx/shape_inference/implementation.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>

#include "engine/atomic_file.h"
#include "engine/autograd/inference_graph.h"
#include "loader/external_data_writer.h"
#include "loader/graph_proto.h"
#include "loader/shape_inference_guard.h"
#include "loader/tensor_proto.h"

namespace dprun {

namespace {

std::string one_line(std::string text) {
  for (char& c : text)
    if (c == '\n' || c == '\r') c = ' ';
  while (!text.empty() && text.back() == ' ') text.pop_back();
  return text;
}

// Rejects opsets newer than the operator schemas this build knows.
void check_opsets(const onnx::ModelProto& model) {
  const auto& ranges = onnx::OpSchemaRegistry::DomainToVersionRange::Instance().Map();
  for (const auto& op : model.opset_import()) {
    std::string domain = op.domain().empty() ? "ai.onnx" : op.domain();
    auto it = ranges.find(op.domain().empty() ? "" : op.domain());
    if (it == ranges.end()) continue;  // custom domains: kernels decide
    if (op.version() > it->second.second || op.version() < 1)
      fail("unsupported opset ", op.version(), " for domain ", domain, " (supported: 1 to ",
           it->second.second, ")");
  }
}

// Fills the graph's value_info with ONNX's shape inference. Data propagation is on: it
// computes shape tensors built from Shape, Gather, Concat, ... so that a Reshape to such a
// tensor gets an output shape. Without it ONNX 1.12 gives that Reshape no shape at all, not
// even a rank, and everything computed from it (a transformer's attention heads, every layer
// after them) stays unknown. If data propagation fails, inference runs again without it from
// the original value_info. Types are a help (kernel choice, gradient building), not a
// requirement: kernels check shapes at run time, so a failing inference is not an error.
void infer_shapes(onnx::ModelProto& model) {
  static GuardedSchemaRegistry schemas;
  const auto original = model.graph().value_info();
  try {
    onnx::ShapeInferenceOptions data_propagation(false, 0, true);
    onnx::shape_inference::InferShapes(model, &schemas, data_propagation);
    return;
  } catch (const std::exception&) {
    *model.mutable_graph()->mutable_value_info() = original;
  }
  try {
    onnx::shape_inference::InferShapes(model, &schemas);
  } catch (const std::exception&) {
    *model.mutable_graph()->mutable_value_info() = original;
  }
}

// `folders` are where external data may be read from (loader/external_data.h). Every external
// reference is checked before the ONNX checker, which would follow them wherever they lead.
// `path` is the model file when there is one: the checker then finds external data files.
std::shared_ptr<Graph> convert(onnx::ModelProto& model, const ExternalDataFolders& folders,
                               const LoadOptions& options, const std::string& path = "") {
  if (!model.has_graph() || model.ir_version() <= 0)
    fail("not an ONNX model (no graph or IR version)");
  check_opsets(model);
  check_external_data(model.graph(), folders);
  if (options.run_checker) {
    try {
      if (!path.empty() && has_external_data(model.graph()))
        onnx::checker::check_model(path);
      else
        onnx::checker::check_model(model);
    } catch (const std::exception& e) {
      fail("the ONNX checker rejects the model: ", one_line(e.what()));
    }
  }
  if (options.run_shape_inference) infer_shapes(model);
  std::map<std::string, int64_t> opsets;
  for (const auto& op : model.opset_import()) opsets[canonical_domain(op.domain())] = op.version();
  if (!opsets.count("")) opsets[""] = 1;
  auto graph = graph_from_proto(model.graph(), opsets, folders);
  graph->ir_version = model.ir_version();
  graph->producer_name = model.producer_name();
  graph->producer_version = model.producer_version();
  return graph;
}

onnx::ModelProto parse_model(const void* data, size_t size) {
  onnx::ModelProto model;
  if (size > static_cast<size_t>(INT32_MAX) || !model.ParseFromArray(data, static_cast<int>(size)))
    fail("not a valid ONNX protobuf (malformed or truncated)");
  return model;
}

}  // namespace

std::shared_ptr<Graph> load_graph_from_buffer(const void* data, size_t size,
                                              const std::string& base_dir,
                                              const LoadOptions& options) {
  onnx::ModelProto model = parse_model(data, size);
  return convert(
      model, base_dir.empty() ? ExternalDataFolders() : ExternalDataFolders::of_folder(base_dir),
      options);
}

std::shared_ptr<Graph> load_graph(const std::string& path, const LoadOptions& options) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) fail(path, ": file not found");
  if (std::filesystem::is_directory(path, ec)) fail(path, ": is a directory, not a model file");
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, ": cannot be opened");
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  try {
    onnx::ModelProto model = parse_model(bytes.data(), bytes.size());
    return convert(model, ExternalDataFolders::of_model_file(path), options, path);
  } catch (const Error& e) {
    fail(path, ": ", e.what());
  }
}

Model load_model(const std::string& path, Device device, const LoadOptions& options,
                 const ModelOptions& model_options) {
  auto graph = load_graph(path, options);
  try {
    return Model(graph, device, model_options);
  } catch (const Error& e) {
    fail(path, ": ", e.what());
  }
}

std::string external_data_path(const std::string& path) {
  return path + ".data";
}

void save_graph(const Graph& graph, const std::map<std::string, Tensor>& parameters,
                const std::string& path, const SaveOptions& options) {
  for (const auto& [name, tensor] : parameters)
    DPRUN_CHECK(graph.initializers.count(name), "save: '", name,
                "' is not a parameter of the graph");
  onnx::ModelProto model;
  model.set_ir_version(graph.ir_version);
  model.set_producer_name(graph.producer_name.empty() ? "dprun" : graph.producer_name);
  if (!graph.producer_version.empty()) model.set_producer_version(graph.producer_version);
  for (const auto& [domain, version] : graph.opset_imports) {
    auto* op = model.add_opset_import();
    op->set_domain(domain);
    op->set_version(version);
  }
  graph_to_proto(graph, parameters, model.mutable_graph());

  std::optional<AtomicFileWriter> data;
  if (raw_tensor_bytes(model.graph()) > options.external_data_threshold) {
    const std::string data_path = external_data_path(path);
    data.emplace(data_path);
    move_to_external_data(*model.mutable_graph(),
                          std::filesystem::path(data_path).filename().string(), *data);
  }
  std::string bytes;
  if (!model.SerializeToString(&bytes)) fail(path, ": the model cannot be serialized");
  AtomicFileWriter model_file(path);
  model_file.write(bytes);
  // The data first: a model file in place always finds its data whole.
  if (data) data->commit();
  model_file.commit();
}

namespace {

// The model's current value of each initializer `graph` keeps.
std::map<std::string, Tensor> parameters_of(const Model& model, const Graph& graph) {
  std::map<std::string, Tensor> params;
  const auto names = model.parameter_names();
  for (size_t i = 0; i < names.size(); ++i)
    if (graph.initializers.count(names[i])) params[names[i]] = model.parameters()[i];
  return params;
}

}  // namespace

void save_model(const Model& model, const std::string& path, const SaveOptions& options) {
  save_graph(model.graph(), parameters_of(model, model.graph()), path, options);
}

void save_inference_model(const Model& model, const std::string& path, const SaveOptions& options) {
  const Graph graph = inference_graph(model.graph());
  save_graph(graph, parameters_of(model, graph), path, options);
}

}  // namespace dprun

namespace dprun {

Tensor read_tensor_proto_file(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) fail(path, ": file not found");
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  onnx::TensorProto proto;
  if (!proto.ParseFromString(bytes) || !proto.has_data_type() || proto.data_type() == 0)
    fail(path, ": not a serialized ONNX tensor");
  try {
    return tensor_from_proto(
        proto, ExternalDataFolders::of_folder(std::filesystem::path(path).parent_path().string()));
  } catch (const Error& e) {
    fail(path, ": ", e.what());
  }
}

}  // namespace dprun
