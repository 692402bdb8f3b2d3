#pragma once
// One test of the ONNX backend test data (model.onnx + test_data_set_*/*.pb), run in this
// process or through the dprun executable, and the comparison both use: rtol 1e-3, atol
// 1e-7, exact for integers, bool and strings.
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/model.h"

namespace dprun::cli {

enum class Status {
  Passed,
  Failed,
  Skipped,    // the model needs something dprun reports as unsupported
  NotViaCli,  // runs in process, but the command line cannot express its inputs
};

struct Result {
  std::string id;  // suite/test
  Status status = Status::Failed;
  std::string reason;
};

/// A test's model compiled for `device`, or the Result (Skipped or Failed) that stops it: a
/// node without kernel, a non-tensor input or output (`non_tensor` is then true), or any
/// other load error.
struct LoadedTest {
  std::shared_ptr<const Graph> graph;
  std::unique_ptr<Model> model;
  std::optional<Result> stop;
  bool non_tensor = false;
};
LoadedTest load_test(const std::filesystem::path& dir, const std::string& id, Device device);

/// The test_data_set_* folders of a test, sorted.
std::vector<std::filesystem::path> data_sets(const std::filesystem::path& dir);
/// The files PREFIX<k>.pb of a data set, in order of k.
std::vector<std::filesystem::path> numbered_files(const std::filesystem::path& dir,
                                                  const std::string& prefix);
/// Empty when `got` equals `want` within the tolerances, else a description of the first
/// mismatch naming output `name`.
std::string compare(const Tensor& got, const Tensor& want, const std::string& name);

/// Runs every data set of the test with Model::run on `device` in this process (inputs are
/// read on the host and copied there; nodes without a kernel on that device run on the CPU).
Result run_test_in_process(const std::filesystem::path& dir, const std::string& id, Device device);

struct ViaCliOptions {
  std::string binary;  // the dprun executable
  int threads = 0;     // --threads for the spawned runs; 0 leaves the default
  Device device;       // --devices for the spawned runs
};
/// Runs every data set of the test through `dprun MODEL --input NAME=FILE.npy ...
/// --output-dir DIR` in a child process: the .pb inputs are written as .npy files in a
/// temporary folder, and the .npy outputs read back and compared. The folder is removed.
/// Tests with a sequence or optional input or output are NotViaCli: the command line reads
/// and writes tensors only.
Result run_test_via_cli(const std::filesystem::path& dir, const std::string& id,
                        const ViaCliOptions& options);

}  // namespace dprun::cli
