#pragma once
// TensorProto <-> Tensor, including every storage form: raw_data, the typed repeated fields,
// and external data files.
#include <onnx/onnx_pb.h>

#include <string>

#include "engine/tensor.h"
#include "loader/external_data.h"

namespace dprun {

/// Converts an initializer or attribute tensor; external data is read from `folders` only
/// (loader/external_data.h). Throws Error naming the tensor on a size mismatch, an
/// unsupported dtype, missing data or external data that is refused.
Tensor tensor_from_proto(const onnx::TensorProto& proto, const ExternalDataFolders& folders);
/// Writes `tensor` (copied to host if needed) into `proto`: raw_data, or string_data for strings.
void tensor_to_proto(const Tensor& tensor, const std::string& name, onnx::TensorProto* proto);

}  // namespace dprun
