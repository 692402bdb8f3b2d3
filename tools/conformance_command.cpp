// `dprun conformance`: runs the ONNX backend test data (model.onnx + test_data_set_*/*.pb)
// and compares with the ONNX runner's tolerances: rtol 1e-3, atol 1e-7, exact for integers,
// bool and strings. A test is skipped when the model needs something dprun reports as
// unsupported (a node without kernel, a non-tensor input or output); any other problem is a
// failure.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "loader/onnx_loader.h"
#include "tools/cli_args.h"
#include "tools/commands.h"

namespace dprun::cli {

namespace fs = std::filesystem;

namespace {

enum class Status { Passed, Failed, Skipped };

struct Result {
  std::string id;  // suite/test
  Status status;
  std::string reason;
};

std::vector<fs::path> numbered_files(const fs::path& dir, const std::string& prefix) {
  std::vector<std::pair<int, fs::path>> files;
  for (const auto& entry : fs::directory_iterator(dir)) {
    std::string name = entry.path().filename().string();
    if (name.rfind(prefix, 0) != 0 || entry.path().extension() != ".pb") continue;
    files.emplace_back(std::stoi(name.substr(prefix.size())), entry.path());
  }
  std::sort(files.begin(), files.end());
  std::vector<fs::path> out;
  for (auto& [index, path] : files) out.push_back(path);
  return out;
}

// The ONNX 1.12 test data stores bfloat16 tensors as uint16 (numpy has no bfloat16): read
// them back as the bfloat16 bits they are when the model declares bfloat16.
Tensor as_declared(Tensor t, DType declared) {
  if (declared != DType::BFloat16 || t.dtype() != DType::UInt16) return t;
  Tensor out = Tensor::empty(t.shape(), DType::BFloat16);
  std::memcpy(out.raw_data(), t.raw_data(), t.nbytes());
  return out;
}

// Empty string when equal within tolerance, else a description of the first mismatch.
std::string compare(const Tensor& got, const Tensor& want, const std::string& name) {
  if (got.dtype() != want.dtype())
    return "output '" + name + "' has dtype " + std::string(dtype_name(got.dtype())) +
           ", expected " + std::string(dtype_name(want.dtype()));
  if (got.shape() != want.shape())
    return "output '" + name + "' has shape " + shape_to_string(got.shape()) + ", expected " +
           shape_to_string(want.shape());
  Tensor host = got.to(Device::cpu());
  if (want.dtype() == DType::String) {
    for (int64_t i = 0; i < want.numel(); ++i)
      if (host.data<std::string>()[i] != want.data<std::string>()[i])
        return "output '" + name + "' element " + std::to_string(i) + " is \"" +
               host.data<std::string>()[i] + "\", expected \"" + want.data<std::string>()[i] + "\"";
    return {};
  }
  bool exact = !is_floating(want.dtype());
  for (int64_t i = 0; i < want.numel(); ++i) {
    double a = host.item_as_double(i), b = want.item_as_double(i);
    if (std::isnan(a) && std::isnan(b)) continue;
    bool ok = exact ? a == b : (a == b || std::fabs(a - b) <= 1e-7 + 1e-3 * std::fabs(b));
    if (!ok) {
      std::ostringstream msg;
      msg << "output '" << name << "' element " << i << " is " << a << ", expected " << b;
      return msg.str();
    }
  }
  return {};
}

bool is_unsupported(const std::string& message) {
  return message.find("kernel") != std::string::npos ||
         message.find("not supported") != std::string::npos ||
         message.find("unsupported") != std::string::npos;
}

Result run_test(const fs::path& dir, const std::string& id) {
  std::shared_ptr<Graph> graph;
  try {
    graph = load_graph((dir / "model.onnx").string());
  } catch (const Error& e) {
    return {id, is_unsupported(e.what()) ? Status::Skipped : Status::Failed, e.what()};
  }
  for (const auto& v : graph->inputs)
    if (v.type.dtype == DType::Undefined)
      return {id, Status::Skipped, "input '" + v.name + "' is not a tensor"};
  for (const auto& v : graph->outputs)
    if (v.type.dtype == DType::Undefined)
      return {id, Status::Skipped, "output '" + v.name + "' is not a tensor"};
  std::unique_ptr<Model> model;
  try {
    model = std::make_unique<Model>(graph, Device::cpu());
  } catch (const Error& e) {
    return {id, is_unsupported(e.what()) ? Status::Skipped : Status::Failed, e.what()};
  }
  int sets = 0;
  try {
    for (const auto& entry : fs::directory_iterator(dir)) {
      if (!entry.is_directory() || entry.path().filename().string().rfind("test_data_set_", 0) != 0)
        continue;
      ++sets;
      auto input_files = numbered_files(entry.path(), "input_");
      auto output_files = numbered_files(entry.path(), "output_");
      if (input_files.size() > graph->inputs.size())
        return {id, Status::Failed, "more input files than graph inputs"};
      std::map<std::string, Tensor> feeds;
      for (size_t i = 0; i < input_files.size(); ++i)
        feeds[graph->inputs[i].name] = as_declared(read_tensor_proto_file(input_files[i].string()),
                                                   graph->inputs[i].type.dtype);
      auto outputs = model->run(feeds);
      if (output_files.size() != outputs.size())
        return {id, Status::Failed, "expected " + std::to_string(output_files.size()) + " outputs"};
      for (size_t o = 0; o < outputs.size(); ++o) {
        std::string diff = compare(outputs[o],
                                   as_declared(read_tensor_proto_file(output_files[o].string()),
                                               graph->outputs[o].type.dtype),
                                   graph->outputs[o].name);
        if (!diff.empty())
          return {id, Status::Failed, entry.path().filename().string() + ": " + diff};
      }
    }
  } catch (const Error& e) {
    return {id, Status::Failed, e.what()};
  }
  if (sets == 0) return {id, Status::Skipped, "no test_data_set_* folder"};
  return {id, Status::Passed, {}};
}

std::set<std::string> read_list(const std::string& path) {
  std::ifstream in(path);
  if (!in) fail(path, ": cannot be read");
  std::set<std::string> names;
  std::string line;
  while (std::getline(in, line)) {
    if (auto hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
    if (!line.empty()) names.insert(line);
  }
  return names;
}

/// The tests named in `expected` that the chosen suites and filter select but that were not
/// found in the data folder, joined by ", " (empty when none is missing).
std::string missing_expected(const std::set<std::string>& expected, const std::vector<Result>& all,
                             const std::vector<std::string>& suites, const std::string& filter) {
  std::set<std::string> found;
  for (const auto& r : all) found.insert(r.id);
  std::string missing;
  for (const auto& id : expected) {
    bool selected =
        std::find(suites.begin(), suites.end(), id.substr(0, id.find('/'))) != suites.end() &&
        (filter.empty() || id.find(filter) != std::string::npos);
    if (selected && !found.count(id)) missing += (missing.empty() ? "" : ", ") + id;
  }
  return missing;
}

}  // namespace

int conformance_command(int argc, char** argv, int first) {
  Args args(argc, argv, first,
            {{"data"}, {"suite"}, {"filter"}, {"expected"}, {"write-passing"}, {"verbose", false}});
  if (!args.positionals().empty()) throw UsageError("conformance takes no positional arguments");
  fs::path root = args.get("data").value_or("/usr/share/libonnx-testdata/data");
  std::string suites_text =
      args.get("suite").value_or("node,pytorch-converted,pytorch-operator,simple");
  std::string filter = args.get("filter").value_or("");
  bool verbose = args.has("verbose");
  std::set<std::string> expected;
  if (auto path = args.get("expected")) expected = read_list(*path);
  if (!fs::is_directory(root))
    fail(root.string(), ": test data folder not found (install libonnx-testdata)");

  std::vector<std::string> suites;
  std::stringstream ss(suites_text);
  for (std::string s; std::getline(ss, s, ',');) suites.push_back(s);

  std::vector<Result> all;
  auto start = std::chrono::steady_clock::now();
  for (const auto& suite : suites) {
    fs::path dir = root / suite;
    if (!fs::is_directory(dir))
      throw UsageError("no conformance suite '" + suite + "' under " + root.string());
    std::vector<fs::path> tests;
    for (const auto& entry : fs::directory_iterator(dir))
      if (entry.is_directory() && fs::exists(entry.path() / "model.onnx"))
        tests.push_back(entry.path());
    std::sort(tests.begin(), tests.end());
    int counts[3] = {0, 0, 0};
    for (const auto& test : tests) {
      std::string id = suite + "/" + test.filename().string();
      if (!filter.empty() && id.find(filter) == std::string::npos) continue;
      Result r = run_test(test, id);
      counts[static_cast<int>(r.status)]++;
      bool regressed = expected.count(id) && r.status != Status::Passed;
      if (verbose || regressed) {
        const char* label = r.status == Status::Passed   ? "PASS"
                            : r.status == Status::Failed ? "FAIL"
                                                         : "SKIP";
        std::printf("%s %s%s%s%s\n", label, id.c_str(), r.reason.empty() ? "" : ": ",
                    r.reason.c_str(), regressed ? "  [REGRESSION: expected to pass]" : "");
      }
      all.push_back(std::move(r));
    }
    std::printf("%-18s %4d passed, %4d failed, %4d skipped\n", suite.c_str(), counts[0], counts[1],
                counts[2]);
    std::fflush(stdout);
  }
  int passed = 0, failed = 0, skipped = 0, regressions = 0;
  for (const auto& r : all) {
    passed += r.status == Status::Passed;
    failed += r.status == Status::Failed;
    skipped += r.status == Status::Skipped;
    regressions += expected.count(r.id) && r.status != Status::Passed;
  }
  if (auto path = args.get("write-passing")) {
    std::ofstream out(*path);
    out << "# ONNX backend conformance tests that must keep passing (suite/test). Regenerate "
           "with:\n"
        << "#   ./build/dprun conformance --write-passing tests/conformance_expected.txt\n";
    for (const auto& r : all)
      if (r.status == Status::Passed) out << r.id << '\n';
    if (!out) fail(*path, ": cannot be written");
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("conformance took %.1f s\n", seconds);
  if (regressions)
    std::printf("%d test%s expected to pass did not\n", regressions, regressions == 1 ? "" : "s");
  std::printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
  std::string missing = missing_expected(expected, all, suites, filter);
  if (!missing.empty())
    std::printf("expected to pass but not found under %s: %s\n", root.string().c_str(),
                missing.c_str());
  return regressions || !missing.empty() ? 1 : 0;
}

}  // namespace dprun::cli
