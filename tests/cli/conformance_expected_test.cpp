// `dprun conformance --expected FILE` on a small data folder made by the test: a test named
// in the list must exist in the data, or the run fails naming it.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "cli_test_util.h"
#include "loader/onnx_loader.h"

namespace dprun::testing {
namespace {

namespace fs = std::filesystem;

// DIR/node/test_present/model.onnx (an Identity model with no test_data_set_*, so it is
// found and skipped) and an empty DIR/simple suite. Each test has its own DIR, as ctest may
// run them at once.
fs::path make_data_folder(const std::string& name) {
  fs::path root = fs::temp_directory_path() / ("dprun_conformance_expected_" + name);
  fs::remove_all(root);
  fs::create_directories(root / "node" / "test_present");
  fs::create_directories(root / "simple");
  Graph g;
  g.name = "identity";
  g.opset_imports[""] = 13;
  g.inputs.push_back({"x", {DType::Float32, SymbolicShape{Dim::known(2)}}});
  Node identity;
  identity.name = "identity";
  identity.op_type = "Identity";
  identity.inputs = {"x"};
  identity.outputs = {"y"};
  g.nodes = {identity};
  g.outputs.push_back({"y", {DType::Float32, SymbolicShape{Dim::known(2)}}});
  save_graph(g, {}, (root / "node" / "test_present" / "model.onnx").string());
  return root;
}

fs::path write_list(const fs::path& root, const std::string& text) {
  fs::path path = root / "expected.txt";
  std::ofstream(path) << text;
  return path;
}

TEST(ConformanceExpected, ListedTestsMissingFromTheDataFail) {
  fs::path root = make_data_folder("missing");
  fs::path list = write_list(root,
                             "# tests that must pass\n"
                             "node/test_absent_one\n"
                             "node/test_absent_two\n"
                             "simple/test_not_selected\n");
  std::string base = "conformance --data " + root.string() + " --expected " + list.string();
  auto r = run_dprun(base + " --suite node");
  EXPECT_EQ(r.status, 1) << r.output;
  // The simple suite was not run, so its test is not reported.
  EXPECT_NE(r.output.find("\nexpected to pass but not found under " + root.string() +
                          ": node/test_absent_one, node/test_absent_two\n"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("node                  0 passed,    0 failed,    1 skipped\n"),
            std::string::npos)
      << r.output;

  r = run_dprun(base + " --suite node --filter absent_two");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("\nexpected to pass but not found under " + root.string() +
                          ": node/test_absent_two\n"),
            std::string::npos)
      << r.output;
  fs::remove_all(root);
}

TEST(ConformanceExpected, ListedTestsOutsideTheSelectionAreNotRequired) {
  fs::path root = make_data_folder("outside");
  fs::path list = write_list(root, "simple/test_not_selected\nnode/test_other\n");
  std::string base = "conformance --data " + root.string() + " --expected " + list.string();
  auto r = run_dprun(base + " --suite node --filter present");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.output.find("not found"), std::string::npos) << r.output;
  fs::remove_all(root);
}

}  // namespace
}  // namespace dprun::testing
