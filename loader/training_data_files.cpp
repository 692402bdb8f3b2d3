#include "loader/training_data_files.h"

#include <algorithm>
#include <filesystem>
#include <memory>
#include <system_error>

#include "engine/mapped_file.h"
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

// A file's data: a view of its pages when it can be (map_npy), else read whole. `mapped`
// is cleared when it is read.
Tensor open_data(const std::string& path, bool& mapped) {
  if (std::optional<Tensor> t = map_npy(path)) return *t;
  mapped = false;
  return read_npy(path);
}

// Runs check(part, first row of the part) over the rows of `t` (along `dim`); along dim 0 of a
// file's pages, a part of about 64 MiB at a time, each part's pages given back after its check,
// so that the checks stream over a file larger than memory.
template <class Check>
void check_by_parts(const Tensor& t, int64_t dim, bool mapped, Check check) {
  if (!mapped || dim != 0 || t.rank() < 1 || t.dim(0) == 0) return check(t, 0);
  const int64_t rows = t.dim(0);
  const size_t row_bytes = t.nbytes() / static_cast<size_t>(rows);
  const int64_t part = std::max<int64_t>(1, static_cast<int64_t>((size_t(64) << 20) / row_bytes));
  char* data = static_cast<char*>(const_cast<void*>(t.raw_data()));  // only read
  for (int64_t first = 0; first < rows; first += part) {
    const int64_t n = std::min(part, rows - first);
    char* start = data + static_cast<size_t>(first) * row_bytes;
    const size_t bytes = static_cast<size_t>(n) * row_bytes;
    Shape shape = t.shape();
    shape[0] = n;
    check(Tensor::from_storage(std::make_shared<Storage>(start, bytes, Device::cpu()), shape,
                               t.dtype()),
          first);
    release_mapped_pages(start, bytes);
  }
}

// Input `name`'s file, checked for values that are not finite.
Tensor read_input(const TrainingDataFiles& f, const std::string& name, bool& mapped) {
  auto it = f.files.find(name);
  DPRUN_CHECK(it != f.files.end(), "training needs data for input '", name, "': give --input ",
              name, "=FILE.npy");
  check_not_directory(it->second, f.option_prefix + "input");
  Tensor t = open_data(it->second, mapped);
  check_by_parts(t, f.dim, mapped, [&](const Tensor& part, int64_t first) {
    check_finite_rows(part, f.dim, it->second, first);
  });
  return t;
}

Tensor read_target(const TrainingDataFiles& f, bool& mapped) {
  check_not_directory(f.target_file, f.option_prefix + "target");
  Tensor target = open_data(f.target_file, mapped);
  check_by_parts(target, 0, mapped, [&](const Tensor& part, int64_t first) {
    check_finite_rows(part, 0, f.target_file, first);
    if (f.labels) check_class_labels(part, *f.labels, f.target_file, first);
  });
  DPRUN_CHECK(target.rank() >= 1, "the target file ", f.target_file,
              " holds a 0-d array; it needs one row per sample");
  return target;
}

}  // namespace

TrainingData read_training_data(const TrainingDataFiles& f) {
  check_files_name_inputs(f);
  std::vector<Tensor> inputs;
  int64_t rows = 0;
  bool mapped = true;  // every file is a view of its pages
  for (const std::string& name : f.input_names) {
    inputs.push_back(read_input(f, name, mapped));
    const int64_t n = rows_along(inputs.back(), f.dim, "input '" + name + "'");
    if (inputs.size() == 1) rows = n;
    check_input_rows(name, n, f.input_names[0], rows, f.dim);
  }
  Tensor target;
  if (!f.target_file.empty()) {
    target = read_target(f, mapped);
    check_target_rows(target, f.input_names.empty() ? "" : f.input_names[0], rows);
  }
  TrainingDataOptions options = f;
  options.release_rows = mapped;
  return TrainingData(f.input_names, std::move(inputs), std::move(target), options);
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
