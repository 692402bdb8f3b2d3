#pragma once
// GraphProto <-> Graph conversion (nodes, attributes, subgraphs, value types).
#include <onnx/onnx_pb.h>

#include <map>
#include <memory>
#include <string>

#include "engine/graph.h"
#include "loader/external_data.h"

namespace dprun {

/// Converts a graph (recursively for subgraph attributes). `opsets` is copied into every
/// Graph; external data is read from `folders` only.
std::shared_ptr<Graph> graph_from_proto(const onnx::GraphProto& proto,
                                        const std::map<std::string, int64_t>& opsets,
                                        const ExternalDataFolders& folders);
/// The declared type of a ValueInfoProto; dtype Undefined when it is not a tensor type.
TensorType type_from_proto(const onnx::TypeProto& type);
/// Writes `graph` into `proto`, with initializers taken from `parameters` where present.
void graph_to_proto(const Graph& graph, const std::map<std::string, Tensor>& parameters,
                    onnx::GraphProto* proto);

}  // namespace dprun
