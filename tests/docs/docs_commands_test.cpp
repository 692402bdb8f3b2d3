// The docs test: every command shown in README.md, docs/*.md and bench/README.md runs as
// written, so no example can rot.
//
// Each file's blocks run in order in a scratch folder of their own that looks like the
// repository root: its top-level entries are links to the source tree's, except models/, a
// copy (a command that wrote there would otherwise change the repository), and build/, a link
// to this build. Outputs (out/, trained models, JSON reports) stay in the scratch folder.
//   ```sh / ```bash   run with bash -e; a non-zero exit fails the test with the block and its
//                     output. /usr/bin comes first on PATH: `python3` in the docs is Debian's,
//                     which has numpy (tools/install-deps.sh installs python3-numpy).
//   ```cpp            a complete program: built against the package that `cmake --install`
//                     makes of this build, with the CMake lines of docs/cpp-api.md, and run
//                     from the scratch folder.
//   ```python         the text of a script under docs/examples/ (which the README shows part
//                     of; ExportScriptWritesTheCommittedModel runs the export script) is checked
//                     to be there; any other block is a program of the Python module's: run
//                     with /usr/bin/python3 and PYTHONPATH=build/python (the module of this
//                     build), left out with a note when the build has no module.
// Markers above a block change this (tests/docs/doc_blocks.h). Blocks not run: the two Quick
// start commands (CI runs them: .ci/run, tools/fresh-machine-check.sh), the PyTorch export
// command (run by ExportScriptWritesTheCommittedModel where torch is installed), the GPU
// check and GPU benchmark (need a GPU), the fresh-machine check (needs root and network), and
// two Google Benchmark programs in bench/README.md (dprun_bench's TrainStep and
// dprun_allreduce_bench). Checked for their options only (help-only): the peer comparisons
// with ONNX Runtime and PyTorch (compare.sh, ort_check.sh, train_vs_torch.sh), which install
// peers and take minutes to half an hour.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "../cli/cli_test_util.h"
#include "doc_blocks.h"

namespace fs = std::filesystem;

namespace dprun::testing {
namespace {

void write_file(const fs::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

std::string shell_quoted(const fs::path& path) {
  return "'" + path.string() + "'";
}

// The Markdown files whose commands are checked, relative to the source tree.
std::vector<std::string> documented_files() {
  std::vector<std::string> files = {"README.md", "bench/README.md"};
  for (const auto& entry : fs::directory_iterator(source_path("docs")))
    if (entry.path().extension() == ".md")
      files.push_back("docs/" + entry.path().filename().string());
  std::sort(files.begin() + 2, files.end());
  return files;
}

// A folder that looks like the repository root (see the top of this file).
fs::path make_scratch_root(const std::string& name) {
  const fs::path root =
      fs::temp_directory_path() / ("dprun_docs_" + name + "_" + std::to_string(getpid()));
  fs::remove_all(root);
  fs::create_directories(root);
  for (const auto& entry : fs::directory_iterator(DPRUN_SOURCE_DIR)) {
    const std::string entry_name = entry.path().filename().string();
    if (entry_name == "build" || entry_name == ".git" || entry_name == "models") continue;
    fs::create_directory_symlink(entry.path(), root / entry_name);
  }
  fs::copy(source_path("models"), root / "models", fs::copy_options::recursive);
  fs::create_directory_symlink(DPRUN_BINARY_DIR, root / "build");
  return root;
}

// The installed package of this build, made once per test program.
fs::path installed_prefix() {
  static const fs::path prefix = [] {
    const fs::path dir =
        fs::temp_directory_path() / ("dprun_docs_install_" + std::to_string(getpid()));
    fs::remove_all(dir);
    const CommandResult r = run_shell("cmake --install " + shell_quoted(DPRUN_BINARY_DIR) +
                                      " --prefix " + shell_quoted(dir));
    if (r.status != 0) ADD_FAILURE() << "cmake --install failed:\n" << r.output;
    return dir;
  }();
  return prefix;
}

// The CMake lines docs/cpp-api.md shows for an application: its first ```cmake block.
std::string documented_cmake_lists() {
  for (const DocBlock& block : extract_blocks(read_text(source_path("docs/cpp-api.md"))))
    if (block.language == "cmake") return block.text;
  ADD_FAILURE() << "docs/cpp-api.md has no ```cmake block";
  return "";
}

std::string describe(const std::string& file, const DocBlock& block) {
  return file + ":" + std::to_string(block.line) + " (```" + block.language + "):\n" + block.text;
}

// Runs a shell block in `root`; fails the test with the block and its output.
void run_shell_block(const std::string& file, const DocBlock& block, const fs::path& root) {
  const fs::path script = root / (".block_" + std::to_string(block.line) + ".sh");
  write_file(script, block.text);
  const CommandResult r = run_shell("cd " + shell_quoted(root) +
                                    " && PATH=/usr/bin:\"$PATH\" bash -e " + shell_quoted(script));
  EXPECT_EQ(r.status, 0) << describe(file, block) << "exited " << r.status << ":\n" << r.output;
}

// Builds a ```cpp block against the installed package and runs it in `root`.
void run_cpp_block(const std::string& file, const DocBlock& block, const fs::path& root) {
  const fs::path project = root / (".cpp_" + std::to_string(block.line));
  fs::create_directories(project);
  write_file(project / "main.cpp", block.text);
  write_file(project / "CMakeLists.txt", documented_cmake_lists());
  CommandResult r =
      run_shell("cmake -S " + shell_quoted(project) + " -B " + shell_quoted(project / "build") +
                " -DCMAKE_PREFIX_PATH=" + shell_quoted(installed_prefix()) +
                " -DCMAKE_BUILD_TYPE=Release && cmake --build " + shell_quoted(project / "build"));
  ASSERT_EQ(r.status, 0) << describe(file, block) << "did not build:\n" << r.output;
  r = run_shell("cd " + shell_quoted(root) + " && " + shell_quoted(project / "build" / "app"));
  EXPECT_EQ(r.status, 0) << describe(file, block) << "exited " << r.status << ":\n" << r.output;
}

// Whether a ```python block is the text of a script under docs/examples/ (an excerpt shown,
// not a program to run).
bool is_example_excerpt(const DocBlock& block) {
  for (const auto& entry : fs::directory_iterator(source_path("docs/examples")))
    if (entry.path().extension() == ".py" &&
        read_text(entry.path()).find(block.text) != std::string::npos)
      return true;
  return false;
}

// Whether /usr/bin/python3 imports `modules` with the build's Python module on its path.
bool python_imports(const std::string& modules) {
  return run_shell("PYTHONPATH=" + shell_quoted(fs::path(DPRUN_BINARY_DIR) / "python") +
                   " /usr/bin/python3 -c 'import " + modules + "'")
             .status == 0;
}

// Runs a ```python block in `root` with the build's module; fails the test with the block and
// its output.
void run_python_block(const std::string& file, const DocBlock& block, const fs::path& root) {
  const fs::path script = root / (".block_" + std::to_string(block.line) + ".py");
  write_file(script, block.text);
  const CommandResult r =
      run_shell("cd " + shell_quoted(root) + " && PYTHONPATH=build/python /usr/bin/python3 " +
                shell_quoted(script));
  EXPECT_EQ(r.status, 0) << describe(file, block) << "exited " << r.status << ":\n" << r.output;
}

// The help of the dprun command that `dprun_part` (a command line from "dprun" on) runs.
std::string command_help(const std::string& dprun_part) {
  static const std::set<std::string> commands = {"run",     "bench",   "train",
                                                 "inspect", "convert", "conformance"};
  std::istringstream words(dprun_part);
  std::string program, command;
  words >> program >> command;
  if (!commands.count(command)) command = "run";
  return run_shell(std::string(DPRUN_BINARY) + " " + command + " --help").output;
}

// Every --option of each dprun command line in the block appears in its command's --help, and
// each script it runs is an executable file of the repository.
void check_options_exist(const std::string& file, const DocBlock& block) {
  static const std::regex option(R"((^|\s)(--[a-z][a-z0-9-]*))");
  for (const std::string& command : command_lines(block.text)) {
    const std::string program = command.substr(0, command.find(' '));
    if (program.find('/') != std::string::npos && program.find("dprun") == std::string::npos) {
      // A script of the repository (bench/peers/...): it must be there to be run.
      const std::string path = program[0] == '/' ? program : source_path(program);
      EXPECT_EQ(access(path.c_str(), X_OK), 0)
          << describe(file, block) << program << " is not an executable file of the repository";
    }
    const size_t at = command.find("dprun ");
    if (at == std::string::npos) continue;
    const std::string dprun_part = command.substr(at);
    const std::string help = command_help(dprun_part);
    for (std::sregex_iterator it(dprun_part.begin(), dprun_part.end(), option), end; it != end;
         ++it) {
      EXPECT_NE(help.find((*it)[2].str()), std::string::npos)
          << describe(file, block) << (*it)[2].str() << " is not an option of " << dprun_part;
    }
  }
}

// `losses-equal A B`: the "losses" of two --json reports agree within 1e-6 relative.
void check_losses_equal(const std::string& file, const DocBlock& block, const fs::path& root) {
  std::istringstream names(block.argument);
  std::string a, b;
  names >> a >> b;
  const auto first = numbers(read_json(root / a), "losses");
  const auto second = numbers(read_json(root / b), "losses");
  ASSERT_TRUE(first && second) << describe(file, block) << "no losses in " << a << " or " << b;
  ASSERT_EQ(first->size(), second->size()) << describe(file, block);
  ASSERT_FALSE(first->empty()) << describe(file, block);
  for (size_t i = 0; i < first->size(); ++i)
    EXPECT_NEAR((*second)[i], (*first)[i], 1e-6 * std::abs((*first)[i]))
        << describe(file, block) << "step " << i + 1 << ": " << b << " against " << a;
}

bool is_shell(const DocBlock& block) {
  return block.language == "sh" || block.language == "bash";
}

// Whether the block is left out here, and why (for the test's log).
std::optional<std::string> left_out(const DocBlock& block) {
  if (block.marker == "skip") return "skipped: " + block.argument;
  if (block.marker == "needs-mpi" && !DPRUN_DOCS_HAVE_MPI) return "this build has no MPI";
  if (block.marker == "needs-cuda-build" && !DPRUN_DOCS_HAVE_CUDA)
    return "this build has no CUDA backend";
  static const bool have_module = python_imports("dprun");
  if (block.marker == "needs-python-module" && !have_module)
    return "the dprun Python module was not built (python3-dev, pybind11-dev)";
  if (block.language == "python" && !is_example_excerpt(block)) {
    if (!have_module) return "the dprun Python module was not built (python3-dev, pybind11-dev)";
    static const bool have_torch = python_imports("torch");
    if (block.marker == "needs-torch" && !have_torch) return "/usr/bin/python3 has no torch";
  }
  return std::nullopt;
}

class DocsCommands : public ::testing::TestWithParam<std::string> {};

TEST_P(DocsCommands, EveryBlockRuns) {
  const std::string file = GetParam();
  std::vector<DocBlock> blocks;
  ASSERT_NO_THROW(blocks = extract_blocks(read_text(source_path(file)))) << file;
  std::string name = file;
  std::replace(name.begin(), name.end(), '/', '_');
  const fs::path root = make_scratch_root(name);
  for (const DocBlock& block : blocks) {
    static const std::set<std::string> markers = {"",
                                                  "skip",
                                                  "help-only",
                                                  "losses-equal",
                                                  "needs-mpi",
                                                  "needs-cuda-build",
                                                  "needs-torch",
                                                  "needs-python-module"};
    ASSERT_TRUE(markers.count(block.marker))
        << describe(file, block) << "unknown marker " << block.marker;
    if (block.marker == "skip") {
      EXPECT_FALSE(block.argument.empty()) << describe(file, block) << "a skip needs a reason";
    }
    if (auto reason = left_out(block)) {
      std::printf("%s:%d: %s\n", file.c_str(), block.line, reason->c_str());
      continue;
    }
    if (is_shell(block) && block.marker == "help-only") {
      check_options_exist(file, block);
    } else if (is_shell(block)) {
      run_shell_block(file, block, root);
      if (block.marker == "losses-equal") check_losses_equal(file, block, root);
    } else if (block.language == "cpp") {
      run_cpp_block(file, block, root);
    } else if (block.language == "python" && !is_example_excerpt(block)) {
      run_python_block(file, block, root);
    }
  }
  if (!HasFailure()) fs::remove_all(root);
}

INSTANTIATE_TEST_SUITE_P(Files, DocsCommands, ::testing::ValuesIn(documented_files()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name = info.param;
                           for (char& c : name)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return name;
                         });

// The Quick start's commands are the ones CI runs; they must be left to it, never dropped.
TEST(DocsExamples, QuickStartCommandsAreLeftToCi) {
  int quick_start = 0;
  for (const DocBlock& block : extract_blocks(read_text(source_path("README.md"))))
    if (is_shell(block) && block.text.find("tools/install-deps.sh && cmake -S . -B build") == 0) {
      ++quick_start;
      EXPECT_EQ(block.marker, "skip") << describe("README.md", block);
    }
  EXPECT_EQ(quick_start, 2);
}

// The export script writes the committed tutorial files, byte for byte (its logits to 1e-5),
// where PyTorch is installed (Debian's python3-torch; CI has none).
TEST(DocsExamples, ExportScriptWritesTheCommittedModel) {
  if (run_shell("/usr/bin/python3 -c 'import torch, onnx, numpy'").status != 0)
    GTEST_SKIP() << "/usr/bin/python3 cannot import torch, onnx and numpy";
  const fs::path out =
      fs::temp_directory_path() / ("dprun_docs_export_" + std::to_string(getpid()));
  fs::remove_all(out);
  const CommandResult r = run_shell(
      "/usr/bin/python3 " + shell_quoted(source_path("docs/examples/export_classifier.py")) + " " +
      shell_quoted(out));
  ASSERT_EQ(r.status, 0) << r.output;
  int files = 0;
  for (const auto& entry : fs::directory_iterator(source_path("models/tutorial"))) {
    ++files;
    const fs::path written = out / entry.path().filename();
    if (entry.path().filename() == "sample.logits.npy") {
      // PyTorch's own outputs: the last bits follow its BLAS (OpenBLAS or the reference BLAS).
      const CommandResult same = run_shell(
          "/usr/bin/python3 -c 'import sys, numpy as n; a, b = n.load(sys.argv[1]), "
          "n.load(sys.argv[2]); sys.exit(not (a.dtype == b.dtype and a.shape == b.shape and "
          "n.allclose(a, b, rtol=1e-5, atol=1e-6)))' " +
          shell_quoted(written) + " " + shell_quoted(entry.path()));
      EXPECT_EQ(same.status, 0) << "sample.logits.npy differs from what the script writes "
                                << same.output;
      continue;
    }
    EXPECT_EQ(read_text(written), read_text(entry.path()))
        << entry.path().filename() << " differs from what the script writes";
  }
  EXPECT_EQ(files, 8);
  EXPECT_EQ(std::distance(fs::directory_iterator(out), fs::directory_iterator()), files);
  fs::remove_all(out);
}

}  // namespace
}  // namespace dprun::testing
