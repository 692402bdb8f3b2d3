#pragma once
// Converts a float32 model to float16 or bfloat16, as onnxconverter-common's
// convert_float_to_float16 does for ONNX Runtime: parameters, constants and computed values
// become 16-bit, halving their memory and letting backends with 16-bit kernels run the
// products on 16-bit hardware (cuBLAS and cuDNN tensor cores, oneDNN's bfloat16 on CPUs that
// have it). A few ops stay in float32 between Casts (float32_ops()): those whose inputs
// the ONNX schemas require in float32, and those that index or count with float values. Nodes
// of other ops without a 16-bit kernel on a backend compute in float32 there anyway
// (float32_fallback.h), rounding their results to 16 bits.
#include <memory>
#include <set>
#include <string>

#include "engine/graph.h"

namespace dprun {

/// How to_half_precision converts a model.
struct HalfPrecisionOptions {
  DType dtype = DType::Float16;  // Float16 or BFloat16
  /// Keep float32 graph inputs and outputs, with Casts after the inputs and before the outputs,
  /// so callers feed and read float32 as before. Otherwise they become 16-bit too.
  bool keep_io_types = true;
  /// Keep float32 initializers, each cast to 16 bits by one Cast for the nodes that compute in
  /// 16 bits: the float32 master weights of mixed-precision training, whose gradients (through
  /// the Casts) are float32 too.
  bool keep_parameters = false;
  /// More ai.onnx ops to keep in float32, beside float32_ops() (training keeps
  /// BatchNormalization there, with its parameters and running statistics).
  std::set<std::string> float32_ops_too;
};

/// A copy of `graph` in which every float32 value (initializer, Constant, input, output,
/// computed value), every Cast and ConstantOfShape to float32, and EyeLike's float32 output are
/// `options.dtype` instead, except the values only float32 ops read (float32_ops() and
/// options.float32_ops_too; they stay float32, as do the unread outputs of those ops), with the
/// float32 ops reading and writing float32 between Casts. Names of inputs, outputs
/// and initializers are kept. Throws Error when options.dtype is not a 16-bit float type, a
/// node holds a subgraph (control flow is not converted) or is a Gradient.
std::shared_ptr<Graph> to_half_precision(const Graph& graph, const HalfPrecisionOptions& options);

/// The ai.onnx ops that to_half_precision keeps in float32: those registered float32_only
/// (engine/op_facts.h; the reasons are at the registrations beside their CPU kernels).
const std::set<std::string>& float32_ops();

}  // namespace dprun
