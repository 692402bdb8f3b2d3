#pragma once
// Model inputs for the CLI: from .npy (or ONNX .pb) files, or deterministic random data.
#include <exception>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "engine/model.h"
#include "engine/training/input_transform.h"

namespace dprun::cli {

struct InputOptions {
  int64_t batch = 1;                         // size of symbolic leading dims
  std::map<std::string, int64_t> dims;       // other symbolic dims by name (default 1)
  std::map<std::string, std::string> files;  // input name -> .npy or .pb path
  /// By input name: how its file's rows become the model's (--layout, --normalize).
  std::map<std::string, InputTransform> transforms;
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
/// declared dtype and shape (error names the input, what was expected and what came); a file
/// for no input is a UsageError listing the model's inputs (check_input_names). Missing ones
/// are generated: floats uniform in [-1, 1), integers in [0, 10) (or [0, N) when the input
/// indexes a table of N rows, see index_bound), bools random, all from a fixed seed so runs
/// repeat. A file with a transform (options.transforms) is transformed before it is checked
/// (transform_all_rows); a transform that does not fit the model (check_transforms_fit) or of an
/// input without a file is a UsageError.
std::vector<Tensor> prepare_inputs(Model& model, const InputOptions& options);
/// Throws UsageError for a name in `files` that is no input of the model: "--input names
/// 'imput', which is not an input of the model (did you mean 'input'? its inputs: input)".
void check_input_names(const std::map<std::string, std::string>& files,
                       const std::vector<std::string>& input_names);
/// The size of the smallest dim that input `name`'s values index: the gathered dim of each
/// Gather whose indices it reaches, followed through the ops that keep its values (Cast,
/// Reshape, Unsqueeze, Squeeze, Flatten, Identity, Expand, Transpose). nullopt when it reaches
/// no Gather of known size (a BERT token_type_ids feeding an embedding of 2 rows gives 2).
std::optional<int64_t> index_bound(const Graph& graph, const std::string& name);
/// The inputs prepare_inputs generates: those without a file.
std::vector<std::string> generated_input_names(const Model& model, const InputOptions& options);
/// Whether --batch sizes any generated input (one has a symbolic leading dim that no --symbol
/// names); when none does, every step runs the rows of the files or the model's fixed batch.
bool batch_sizes_an_input(const Model& model, const InputOptions& options);
/// Rethrows `error` (as Error, exit status 1) with a note that the inputs `generated` were
/// generated and how to give real ones; rethrows it unchanged when none was. Call it from the
/// catch block that caught `error`.
[[noreturn]] void rethrow_noting_generated(const std::exception& error,
                                           const std::vector<std::string>& generated);
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
