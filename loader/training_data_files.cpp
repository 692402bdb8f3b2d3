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

}  // namespace dprun
