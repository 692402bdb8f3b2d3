#pragma once
// One test of the ONNX backend test data (model.onnx + test_data_set_*/*.pb), run in this
// process or through the dprun executable, and the comparison both use: rtol 1e-3, atol
// 1e-7, exact for integers, bool and strings. In process, a test may also run converted to
// float16 or bfloat16 (engine/rewrites/half_precision.h), against the float32 expected
// outputs within 16 bits' error.
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
/// With `precision` float16 or bfloat16 the model is converted first (its float32 inputs and
/// outputs kept); a model the conversion refuses (control flow) is Skipped.
LoadedTest load_test(const std::filesystem::path& dir, const std::string& id, Device device,
                     DType precision = DType::Float32);

/// The test_data_set_* folders of a test, sorted.
std::vector<std::filesystem::path> data_sets(const std::filesystem::path& dir);
/// The files PREFIX<k>.pb of a data set, in order of k.
std::vector<std::filesystem::path> numbered_files(const std::filesystem::path& dir,
                                                  const std::string& prefix);
/// How close a float output must be: |got - want| <= atol + rtol * |want| + of_scale * the
/// largest |want| of the output (16-bit runs: cancellation near zero loses all relative
/// accuracy, so part of the bound follows the output's scale).
struct Tolerance {
  double rtol = 1e-3, atol = 1e-7, of_scale = 0;
};
/// The tolerance of a run in `precision`: the ONNX runner's for float32; for float16 (11
/// significant bits, rounded again at every node) 1e-2 relative plus 1e-2 of the output's
/// scale; for bfloat16 (8 bits) 5e-2 and 5e-2.
Tolerance tolerance_for(DType precision);
/// Empty when `got` equals `want` within the tolerances, else a description of the first
/// mismatch naming output `name`.
std::string compare(const Tensor& got, const Tensor& want, const std::string& name,
                    const Tolerance& tolerance = {});

/// Runs every data set of the test with Model::run on `device` in this process (inputs are
/// read on the host and copied there; nodes without a kernel on that device run on the CPU).
Result run_test_in_process(const std::filesystem::path& dir, const std::string& id, Device device,
                           DType precision = DType::Float32);

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
