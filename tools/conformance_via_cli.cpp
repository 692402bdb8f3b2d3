// The --via-cli mode of `dprun conformance`: each data set goes through the dprun executable
// with .npy files, as a user would run it.
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <set>

#include "loader/npy.h"
#include "loader/onnx_loader.h"
#include "tools/conformance.h"
#include "tools/inputs.h"
#include "tools/outputs.h"
#include "tools/subprocess.h"

namespace dprun::cli {

namespace fs = std::filesystem;

namespace {

// A fresh folder under the system temporary folder, removed with everything in it when the
// guard goes.
class TempFolder {
 public:
  TempFolder() {
    static std::atomic<int> counter{0};
    path_ = fs::temp_directory_path() /
            ("dprun-conformance-" + std::to_string(getpid()) + "-" + std::to_string(counter++));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempFolder() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempFolder(const TempFolder&) = delete;
  TempFolder& operator=(const TempFolder&) = delete;
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// `t` reinterpreted with the same bits as `dtype` (both 2 bytes wide).
Tensor reinterpret(const Tensor& t, DType dtype) {
  Tensor out = Tensor::empty(t.shape(), dtype);
  std::memcpy(out.raw_data(), t.raw_data(), t.nbytes());
  return out;
}

// An input as a user would save it with numpy: bfloat16, which numpy lacks, as its uint16 bits.
Tensor as_numpy_input(const Tensor& t) {
  return t.dtype() == DType::BFloat16 ? reinterpret(t, DType::UInt16) : t;
}

// A written output as the dtype the model declares: the CLI writes bfloat16 as float32, which
// holds every bfloat16 value exactly.
Tensor as_declared_output(const Tensor& t, DType declared) {
  if (declared != DType::BFloat16 || t.dtype() != DType::Float32) return t;
  Tensor out = Tensor::empty(t.shape(), DType::BFloat16);
  for (int64_t i = 0; i < t.numel(); ++i) out.data<BFloat16>()[i] = BFloat16(t.data<float>()[i]);
  return out;
}

// Why the command line cannot run this test, or empty: an input file that feeds an
// initializer (--input names only the inputs a caller must feed), or two outputs whose file
// names collide.
std::string cli_limitation(const Graph& graph, const fs::path& set) {
  auto input_files = numbered_files(set, "input_");
  for (size_t i = 0; i < input_files.size() && i < graph.inputs.size(); ++i)
    if (graph.initializers.count(graph.inputs[i].name))
      return "input '" + graph.inputs[i].name +
             "' has an initializer, which --input cannot replace";
  std::set<std::string> files;
  for (const auto& out : graph.outputs)
    if (!files.insert(safe_file_name(out.name)).second)
      return "two outputs are written to " + safe_file_name(out.name) + ".npy";
  return {};
}

// The last non-empty line of a child's output: dprun's one-line error.
std::string last_line(const std::string& output) {
  size_t end = output.find_last_not_of("\r\n");
  if (end == std::string::npos) return "no output";
  size_t start = output.rfind('\n', end);
  return output.substr(start == std::string::npos ? 0 : start + 1, end - start);
}

// The dprun arguments for one data set; writes its inputs as .npy files under `folder`.
std::vector<std::string> cli_arguments(const fs::path& dir, const Graph& graph, const fs::path& set,
                                       const fs::path& folder, const ViaCliOptions& options) {
  std::vector<std::string> args{(dir / "model.onnx").string(), "--devices",
                                options.device.to_string()};
  if (options.threads > 0) args.insert(args.end(), {"--threads", std::to_string(options.threads)});
  auto input_files = numbered_files(set, "input_");
  for (size_t i = 0; i < input_files.size(); ++i) {
    fs::path npy = folder / ("input_" + std::to_string(i) + ".npy");
    write_npy(as_numpy_input(read_tensor_proto_file(input_files[i].string())), npy.string());
    args.insert(args.end(), {"--input", graph.inputs[i].name + "=" + npy.string()});
  }
  args.insert(args.end(), {"--output-dir", (folder / "out").string()});
  return args;
}

// Compares the .npy outputs written under `out_dir` with the expected .pb outputs.
std::string compare_outputs(const Graph& graph, const fs::path& set, const fs::path& out_dir) {
  auto output_files = numbered_files(set, "output_");
  if (output_files.size() != graph.outputs.size())
    return "expected " + std::to_string(output_files.size()) + " outputs";
  for (size_t o = 0; o < graph.outputs.size(); ++o) {
    const ValueInfo& info = graph.outputs[o];
    fs::path file = out_dir / (safe_file_name(info.name) + ".npy");
    if (!fs::exists(file)) return "dprun wrote no " + file.filename().string();
    Tensor got = as_declared_output(read_npy(file.string()), info.type.dtype);
    Tensor want = as_declared(read_tensor_proto_file(output_files[o].string()), info.type.dtype);
    std::string diff = compare(got, want, info.name);
    if (!diff.empty()) return diff;
  }
  return {};
}

// Runs one data set through the executable; empty on success, else the reason it failed.
std::string run_data_set(const fs::path& dir, const Graph& graph, const fs::path& set,
                         const ViaCliOptions& options) {
  size_t files = numbered_files(set, "input_").size();
  if (files > graph.inputs.size()) return "more input files than graph inputs";
  // In process such a run fails as the input is missing; dprun would generate random data.
  for (size_t i = files; i < graph.inputs.size(); ++i)
    if (!graph.initializers.count(graph.inputs[i].name))
      return "input '" + graph.inputs[i].name + "' is missing";
  TempFolder folder;
  auto args = cli_arguments(dir, graph, set, folder.path(), options);
  ProcessResult run = run_process(options.binary, args, (folder.path() / "log.txt").string());
  if (run.status != 0)
    return "exit status " + std::to_string(run.status) + ": " + last_line(run.output);
  return compare_outputs(graph, set, folder.path() / "out");
}

}  // namespace

Result run_test_via_cli(const fs::path& dir, const std::string& id, const ViaCliOptions& options) {
  LoadedTest test = load_test(dir, id, options.device);
  if (test.non_tensor)
    return {id, Status::NotViaCli,
            test.stop->reason + "; the command line reads and writes tensors only"};
  if (test.stop) return *test.stop;
  auto sets = data_sets(dir);
  if (sets.empty()) return {id, Status::Skipped, "no test_data_set_* folder"};
  for (const auto& set : sets) {
    std::string limitation = cli_limitation(*test.graph, set);
    if (!limitation.empty()) return {id, Status::NotViaCli, limitation};
  }
  try {
    for (const auto& set : sets) {
      std::string failure = run_data_set(dir, *test.graph, set, options);
      if (!failure.empty()) return {id, Status::Failed, set.filename().string() + ": " + failure};
    }
  } catch (const std::exception& e) {
    return {id, Status::Failed, e.what()};
  }
  return {id, Status::Passed, {}};
}

}  // namespace dprun::cli
