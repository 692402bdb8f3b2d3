#pragma once
// TensorProto <-> Tensor, including every storage form: raw_data, the typed repeated fields,
// and external data files.
#include <onnx/onnx_pb.h>

#include <string>

#include "engine/tensor.h"

namespace dprun {

/// Converts an initializer or attribute tensor. `base_dir` resolves external data locations.
/// Throws Error naming the tensor on a size mismatch, an unsupported dtype or missing data.
Tensor tensor_from_proto(const onnx::TensorProto& proto, const std::string& base_dir);
/// Writes `tensor` (copied to host if needed) into `proto`: raw_data, or string_data for strings.
void tensor_to_proto(const Tensor& tensor, const std::string& name, onnx::TensorProto* proto);

}  // namespace dprun
