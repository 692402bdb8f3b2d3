// `dprun conformance`: runs the ONNX backend test data (model.onnx + test_data_set_*/*.pb),
// in this process or, with --via-cli, through the dprun executable with .npy files, and
// compares with the ONNX runner's tolerances (tools/conformance.h), on cpu:0 or on the device
// named by --device. A test is skipped when the model needs something dprun reports as
// unsupported (a node without kernel, a non-tensor input or output); any other problem is a
// failure.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "engine/backend.h"
#include "tools/command_line.h"
#include "tools/commands.h"
#include "tools/conformance.h"
#include "tools/parallel_options.h"

namespace dprun::cli {

namespace fs = std::filesystem;

namespace {

struct Options {
  fs::path root;
  std::vector<std::string> suites;
  std::string filter;
  std::set<std::string> expected;
  bool verbose = false;
  bool via_cli = false;
  int jobs = 1;
  Device device;
  DType precision = DType::Float32;
  ViaCliOptions cli;
};

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

// The options as given on the command line; Options is what the run uses.
struct ConformanceFlags {
  std::optional<std::string> data, suite, filter, expected, write_passing, device, precision;
  bool verbose = false, via_cli = false;
  std::optional<int64_t> jobs;
};

std::unique_ptr<CLI::App> conformance_app(ConformanceFlags& flags) {
  auto app = command_app(
      "usage: dprun conformance [options]\nrun the ONNX backend conformance suite", kTestingAids);
  add_text(*app, "--data", "DIR", flags.data,
           "test data root (default /usr/share/libonnx-testdata/data)");
  add_text(*app, "--suite", "LIST", flags.suite,
           "comma-separated suites (default node,pytorch-converted,pytorch-operator,simple)");
  add_text(*app, "--filter", "TEXT", flags.filter, "only tests whose name contains TEXT");
  add_text(*app, "--expected", "FILE", flags.expected,
           "fail (exit 1) if a test listed in FILE does not pass");
  add_text(*app, "--write-passing", "FILE", flags.write_passing,
           "write the names of passing tests to FILE");
  add_flag(*app, "--verbose", flags.verbose, "print every test's result");
  CLI::Option* via_cli =
      add_flag(*app, "--via-cli", flags.via_cli,
               "run each test through this executable (dprun MODEL --input NAME=FILE.npy ... "
               "--output-dir DIR) instead of in this process");
  add_integer(*app, "--jobs", "N", flags.jobs, 1, 256,
              "with --via-cli, run N tests at once (default 1)")
      ->needs(via_cli);
  add_text(*app, "--device", "DEV", flags.device,
           "run the tests on DEV (default cpu:0; cuda:0 runs each model on the GPU, its nodes "
           "without a CUDA kernel on the host)");
  add_precision_option(*app, flags.precision,
                       "float16 or bfloat16: run each test converted to P (float32 inputs and "
                       "outputs kept) against the float32 expected outputs within 16 bits' error "
                       "(in process only)")
      ->excludes(via_cli);
  return app;
}

Options parse_options(const ConformanceFlags& flags) {
  Options o;
  o.root = flags.data.value_or("/usr/share/libonnx-testdata/data");
  std::stringstream ss(flags.suite.value_or("node,pytorch-converted,pytorch-operator,simple"));
  for (std::string s; std::getline(ss, s, ',');) o.suites.push_back(s);
  o.filter = flags.filter.value_or("");
  o.verbose = flags.verbose;
  o.via_cli = flags.via_cli;
  o.jobs = static_cast<int>(flags.jobs.value_or(1));
  if (const auto& path = flags.expected) o.expected = read_list(*path);
  if (!fs::is_directory(o.root))
    fail(o.root.string(), ": test data folder not found (install libonnx-testdata)");
  o.cli.binary = fs::read_symlink("/proc/self/exe").string();
  o.cli.threads = o.jobs > 1 ? 1 : 0;  // one core each when the runs share the machine
  try {
    o.device = Device::parse(flags.device.value_or("cpu:0"));
  } catch (const Error& e) {
    throw UsageError(std::string("--device: ") + e.what());
  }
  backend_for(o.device).check_device(o.device);  // "device cuda:0: no CUDA GPU is present"
  if (auto precision = precision_of(flags.precision)) o.precision = *precision;
  o.cli.device = o.device;
  return o;
}

// The test folders of `suite` whose id matches the filter, sorted.
std::vector<fs::path> suite_tests(const Options& o, const std::string& suite) {
  fs::path dir = o.root / suite;
  if (!fs::is_directory(dir))
    throw UsageError("no conformance suite '" + suite + "' under " + o.root.string());
  std::vector<fs::path> tests;
  for (const auto& entry : fs::directory_iterator(dir)) {
    std::string id = suite + "/" + entry.path().filename().string();
    if (entry.is_directory() && fs::exists(entry.path() / "model.onnx") &&
        (o.filter.empty() || id.find(o.filter) != std::string::npos))
      tests.push_back(entry.path());
  }
  std::sort(tests.begin(), tests.end());
  return tests;
}

Result run_one(const Options& o, const fs::path& test, const std::string& suite) {
  std::string id = suite + "/" + test.filename().string();
  return o.via_cli ? run_test_via_cli(test, id, o.cli)
                   : run_test_in_process(test, id, o.device, o.precision);
}

// Runs `tests` on o.jobs threads; results in the order of `tests`.
std::vector<Result> run_tests(const Options& o, const std::vector<fs::path>& tests,
                              const std::string& suite) {
  std::vector<Result> results(tests.size());
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next++; i < tests.size(); i = next++) results[i] = run_one(o, tests[i], suite);
  };
  std::vector<std::thread> workers;
  for (int j = 1; j < o.jobs; ++j) workers.emplace_back(work);
  work();
  for (auto& w : workers) w.join();
  return results;
}

const char* label(Status s) {
  switch (s) {
    case Status::Passed:
      return "PASS";
    case Status::Failed:
      return "FAIL";
    case Status::Skipped:
      return "SKIP";
    case Status::NotViaCli:
      return "NOT-VIA-CLI";
  }
  return "?";
}

bool is_regression(const Options& o, const Result& r) {
  return o.expected.count(r.id) && r.status != Status::Passed && r.status != Status::NotViaCli;
}

void print_result(const Options& o, const Result& r) {
  bool regressed = is_regression(o, r);
  if (!o.verbose && !regressed && r.status != Status::NotViaCli) return;
  std::printf("%s %s%s%s%s\n", label(r.status), r.id.c_str(), r.reason.empty() ? "" : ": ",
              r.reason.c_str(), regressed ? "  [REGRESSION: expected to pass]" : "");
}

void print_counts(const std::string& what, const std::vector<Result>& results, bool via_cli) {
  int counts[4] = {0, 0, 0, 0};
  for (const auto& r : results) counts[static_cast<int>(r.status)]++;
  std::printf("%-18s %4d passed, %4d failed, %4d skipped", what.c_str(), counts[0], counts[1],
              counts[2]);
  if (via_cli) std::printf(", %4d not expressible on the command line", counts[3]);
  std::printf("\n");
}

void write_passing(const Options& o, const std::string& path, const std::vector<Result>& all) {
  std::ofstream out(path);
  const std::string precision =
      o.precision == DType::Float32 ? "" : " --precision " + std::string(dtype_name(o.precision));
  out << "# ONNX backend conformance tests that must keep passing (suite/test)"
      << (precision.empty() ? "" : ", converted to " + std::string(dtype_name(o.precision)))
      << ". Regenerate with:\n"
      << "#   ./build/dprun conformance" << precision << " --write-passing " << path << "\n";
  for (const auto& r : all)
    if (r.status == Status::Passed) out << r.id << '\n';
  if (!out) fail(path, ": cannot be written");
}

/// The tests named in `expected` that the chosen suites and filter select but that were not
/// found in the data folder, joined by ", " (empty when none is missing).
std::string missing_expected(const Options& o, const std::vector<Result>& all) {
  const auto& expected = o.expected;
  const auto& suites = o.suites;
  const auto& filter = o.filter;
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

std::string conformance_help() {
  ConformanceFlags flags;
  return command_help(*conformance_app(flags));
}

int conformance_command(int argc, char** argv, int first) {
  ConformanceFlags flags;
  parse_command_line(*conformance_app(flags), argc, argv, first);
  Options o = parse_options(flags);
  std::vector<Result> all;
  auto start = std::chrono::steady_clock::now();
  for (const auto& suite : o.suites) {
    std::vector<Result> results = run_tests(o, suite_tests(o, suite), suite);
    for (const auto& r : results) print_result(o, r);
    print_counts(suite, results, o.via_cli);
    std::fflush(stdout);
    all.insert(all.end(), results.begin(), results.end());
  }
  if (const auto& path = flags.write_passing) write_passing(o, *path, all);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("conformance%s took %.1f s\n", o.via_cli ? " via the command line" : "", seconds);
  int regressions = static_cast<int>(
      std::count_if(all.begin(), all.end(), [&](const Result& r) { return is_regression(o, r); }));
  if (regressions)
    std::printf("%d test%s expected to pass did not\n", regressions, regressions == 1 ? "" : "s");
  print_counts("total", all, o.via_cli);
  std::string missing = missing_expected(o, all);
  if (!missing.empty())
    std::printf("expected to pass but not found under %s: %s\n", o.root.string().c_str(),
                missing.c_str());
  return regressions || !missing.empty() ? 1 : 0;
}

}  // namespace dprun::cli
