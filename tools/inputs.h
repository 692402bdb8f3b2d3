#pragma once
// Model inputs for the CLI: from .npy (or ONNX .pb) files, or deterministic random data.
#include <map>
#include <string>
#include <vector>

#include "engine/model.h"

namespace dprun::cli {

struct InputOptions {
  int64_t batch = 1;                         // size of symbolic leading dims
  std::map<std::string, int64_t> dims;       // other symbolic dims by name (default 1)
  std::map<std::string, std::string> files;  // input name -> .npy or .pb path
};

/// Gives the model the files of `files` that name an initializer the graph also lists as an
/// input (an input with a default, as older exporters and training graphs write them; ONNX
/// lets a feed override it): each becomes that parameter's value, for every run and every
/// replica. Its dtype and shape must be the initializer's (UsageError naming both otherwise).
/// Returns the other files.
std::map<std::string, std::string> apply_initializer_overrides(
    Model& model, const std::map<std::string, std::string>& files);
/// One tensor per model input, in model.input_names() order, after the files that override
/// initializers are applied (apply_initializer_overrides). Files are checked against the
/// declared dtype and shape (error names the input, what was expected and what came);
/// missing ones are generated: floats uniform in [-1, 1), integers in [0, 10), bools random,
/// all from a fixed seed so runs repeat.
std::vector<Tensor> prepare_inputs(Model& model, const InputOptions& options);
/// The inputs in memory that the first non-CPU device of `devices` copies from by DMA
/// (Tensor::pin_memory), so that each run's scatter copies them at the link's speed; as they
/// are when every device is a CPU device or no page-locked memory can be had.
std::vector<Tensor> pin_for_devices(std::vector<Tensor> inputs, const std::vector<Device>& devices);
/// `t` as the dtype a model declares, where the file format cannot say it: a uint16 tensor
/// (numpy '<u2' or 'V2', or the uint16 of ONNX's bfloat16 test data) is reinterpreted bit for
/// bit as bfloat16 when `declared` is bfloat16. Any other tensor is returned unchanged.
Tensor as_declared(const Tensor& t, DType declared);
/// The concrete shape an input gets when generated.
Shape concrete_shape(const TensorType& type, const InputOptions& options);

}  // namespace dprun::cli
