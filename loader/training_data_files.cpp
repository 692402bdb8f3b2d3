#include "loader/training_data_files.h"

#include <filesystem>
#include <system_error>

#include "loader/npy.h"

namespace dprun {

namespace {

// Every file is for an input of the model.
void check_files_name_inputs(const TrainingDataFiles& f) {
  for (const auto& [name, path] : f.files) {
    bool known = false;
    for (const auto& input : f.input_names) known |= input == name;
    DPRUN_CHECK(known, "--input names '", name, "', which is not an input of the model");
  }
}

// Input `name`'s file, read and checked for values that are not finite.
Tensor read_input(const TrainingDataFiles& f, const std::string& name) {
  auto it = f.files.find(name);
  DPRUN_CHECK(it != f.files.end(), "training needs data for input '", name, "': give --input ",
              name, "=FILE.npy");
  check_not_directory(it->second, f.option_prefix + "input");
  Tensor t = read_npy(it->second);
  check_finite_rows(t, f.dim, it->second);
  return t;
}

Tensor read_target(const TrainingDataFiles& f) {
  check_not_directory(f.target_file, f.option_prefix + "target");
  Tensor target = read_npy(f.target_file);
  check_finite_rows(target, 0, f.target_file);
  if (f.labels) check_class_labels(target, *f.labels, f.target_file);
  DPRUN_CHECK(target.rank() >= 1, "the target file ", f.target_file,
              " holds a 0-d array; it needs one row per sample");
  return target;
}

}  // namespace

TrainingData read_training_data(const TrainingDataFiles& f) {
  check_files_name_inputs(f);
  std::vector<Tensor> inputs;
  int64_t rows = 0;
  for (const std::string& name : f.input_names) {
    inputs.push_back(read_input(f, name));
    const int64_t n = rows_along(inputs.back(), f.dim, "input '" + name + "'");
    if (inputs.size() == 1) rows = n;
    check_input_rows(name, n, f.input_names[0], rows, f.dim);
  }
  Tensor target;
  if (!f.target_file.empty()) {
    target = read_target(f);
    check_target_rows(target, f.input_names.empty() ? "" : f.input_names[0], rows);
  }
  return TrainingData(f.input_names, std::move(inputs), std::move(target), f);
}

void check_not_directory(const std::string& path, const std::string& option) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    fail(path, ": is a directory; --", option, " takes a .npy file");
}

namespace {

// The shape the target of `loss` has for an output of shape `output`: the output's, without
// the class dim for the class losses.
std::optional<SymbolicShape> target_shape(const LossSpec& loss, const SymbolicShape& output) {
  if (loss.kind != LossKind::CrossEntropy && loss.kind != LossKind::Nll) return output;
  const auto rank = static_cast<int64_t>(output.size());
  const int64_t c = loss.class_dim < 0 ? loss.class_dim + rank : loss.class_dim;
  if (c < 1 || c >= rank) return std::nullopt;  // the loss itself reports a bad class dim
  SymbolicShape target = output;
  target.erase(target.begin() + c);
  return target;
}

bool fits(const Shape& file, const SymbolicShape& wanted) {
  if (file.size() != wanted.size()) return false;
  for (size_t d = 1; d < file.size(); ++d)
    if (wanted[d].is_known() && wanted[d].value != file[d]) return false;
  return true;
}

// "hidden [batch, 64], logits [batch, 10]"
std::string outputs_with_shapes(const Graph& graph) {
  std::string listed;
  for (const ValueInfo& out : graph.outputs) {
    if (!listed.empty()) listed += ", ";
    listed += out.name;
    if (out.type.shape) listed += ' ' + shape_to_string(*out.type.shape);
  }
  return listed;
}

}  // namespace

void check_target_fits(const Graph& graph, const LossSpec& loss, const std::string& target_path) {
  if (graph.outputs.empty() || !loss_needs_target(loss.kind)) return;
  const std::string output = loss.output.empty() ? graph.outputs.front().name : loss.output;
  const std::optional<TensorType> type = graph.type_of(output);
  const std::optional<Shape> file = read_npy_shape(target_path);
  if (!type || !type->shape || !file) return;
  const std::optional<SymbolicShape> wanted = target_shape(loss, *type->shape);
  if (!wanted || fits(*file, *wanted)) return;
  fail("--target ", target_path, " holds ", shape_to_string(*file), ", but --loss ",
       loss_kind_name(loss.kind), " on output '", output, "' ", shape_to_string(*type->shape),
       " needs targets of shape ", shape_to_string(*wanted), " (a row per sample); the model's ",
       "outputs: ", outputs_with_shapes(graph), ": name the one the loss reads with --output NAME");
}

}  // namespace dprun
