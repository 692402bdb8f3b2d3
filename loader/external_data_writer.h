#pragma once
// Writing a model's large tensors to an external data file beside it, as
// onnx.save_model(..., save_as_external_data=True) does, so that a model past protobuf's 2 GiB
// limit can be saved.
#include <onnx/onnx_pb.h>

#include <cstdint>
#include <string>

#include "engine/atomic_file.h"

namespace dprun {

/// Tensors smaller than this stay inside the model file (ONNX's size_threshold).
inline constexpr uint64_t kExternalTensorMinBytes = 1024;

/// The bytes of raw data the tensors of `graph` and its subgraphs hold.
uint64_t raw_tensor_bytes(const onnx::GraphProto& graph);

/// Moves the raw data of every tensor of `graph` (initializers, attribute tensors, subgraphs)
/// of at least kExternalTensorMinBytes into `data`, each at an offset aligned to 64 bytes,
/// and points the tensor there: data_location EXTERNAL with `location` (a file name relative
/// to the model's folder), offset and length.
void move_to_external_data(onnx::GraphProto& graph, const std::string& location,
                           AtomicFileWriter& data);

}  // namespace dprun
