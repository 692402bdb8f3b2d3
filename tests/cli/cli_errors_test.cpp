// Bad input never crashes dprun: each case exits non-zero with one clear line.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "cli_test_util.h"
#include "engine/backend.h"

namespace dprun::testing {
namespace {

namespace fs = std::filesystem;

fs::path scratch() {
  fs::path dir = fs::temp_directory_path() / "dprun_cli_errors";
  fs::create_directories(dir);
  return dir;
}

int line_count(const std::string& text) {
  int lines = 0;
  for (char c : text) lines += c == '\n';
  return lines;
}

void expect_error(const CommandResult& r, int status, const std::string& needle) {
  EXPECT_EQ(r.status, status) << r.output;
  EXPECT_NE(r.output.find(needle), std::string::npos) << r.output;
  EXPECT_EQ(line_count(r.output), 1) << r.output;
}

TEST(CliErrors, HelpSucceeds) {
  auto r = run_dprun("--help");
  EXPECT_EQ(r.status, 0);
  EXPECT_NE(r.output.find("usage:"), std::string::npos);
}

TEST(CliErrors, NoArgumentsIsAUsageError) {
  EXPECT_EQ(run_dprun("").status, 2);
}

TEST(CliErrors, UnknownFlag) {
  expect_error(run_dprun(source_path("models/mlp.onnx") + " --bogus"), 2,
               "unknown option '--bogus'");
}

TEST(CliErrors, BadNumber) {
  expect_error(run_dprun(source_path("models/mlp.onnx") + " --batch many"), 2,
               "--batch must be an integer");
  expect_error(run_dprun(source_path("models/mlp.onnx") + " --batch 0"), 2,
               "--batch must be between");
}

TEST(CliErrors, BadDeviceList) {
  expect_error(run_dprun(source_path("models/mlp.onnx") + " --devices cpu:0,cpu:0"), 2,
               "appears twice");
  expect_error(run_dprun(source_path("models/mlp.onnx") + " --devices tpu:0"), 2, "invalid device");
}

TEST(CliErrors, CudaDevicesNeedACudaGpu) {
#if DPRUN_WITH_CUDA
  if (backend_available(DeviceType::CUDA)) GTEST_SKIP() << "a CUDA GPU is present";
  const std::string why = "no CUDA GPU is present\n";
#else
  const std::string why = "this build of dprun has no CUDA support\n";
#endif
  std::string model = source_path("models/mlp.onnx");
  for (const char* devices : {"cuda:0", "cuda:0,cuda:1", "0,1"}) {
    auto r = run_dprun(model + " --devices " + devices);
    EXPECT_EQ(r.status, 1) << devices;
    EXPECT_EQ(r.output, "dprun: error: device cuda:0: " + why) << devices;
  }
  auto r = run_dprun(source_path("models/cnn.onnx") + " --devices cuda:0");
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.output, "dprun: error: device cuda:0: " + why);
  r = run_dprun(model + " --devices cpu:0 --output-device cuda:1");
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.output, "dprun: error: device cuda:1: " + why);
  r = run_dprun("bench " + model + " --devices cuda:2");
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.output, "dprun: error: device cuda:2: " + why);
}

TEST(CliErrors, MissingModel) {
  expect_error(run_dprun("/nonexistent/model.onnx"), 1, "file not found");
}

TEST(CliErrors, NotAModel) {
  fs::path p = scratch() / "text.onnx";
  std::ofstream(p) << "hello, this is text\n";
  expect_error(run_dprun(p.string()), 1, "text.onnx");
}

TEST(CliErrors, TruncatedModel) {
  fs::path p = scratch() / "truncated.onnx";
  std::ifstream in(source_path("models/cnn.onnx"), std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::ofstream(p, std::ios::binary) << bytes.substr(0, bytes.size() / 3);
  expect_error(run_dprun(p.string()), 1, "truncated.onnx");
}

TEST(CliErrors, InputForUnknownName) {
  expect_error(run_dprun(source_path("models/mlp.onnx") +
                         " --input nope=" + source_path("models/mlp.input.input.npy")),
               2, "'nope', which is not an input");
}

TEST(CliErrors, WrongInputShapeNamesTheInput) {
  expect_error(run_dprun(source_path("models/mlp.onnx") +
                         " --input input=" + source_path("models/cnn.input.image.npy")),
               1, "input 'input' expects shape [batch, 784] but got [4, 3, 32, 32]");
}

TEST(CliErrors, WrongInputDtypeNamesTheInput) {
  expect_error(run_dprun(source_path("models/transformer.onnx") + " --input input_ids=" +
                         source_path("models/transformer.input.attention_mask.npy")),
               1, "input 'input_ids' expects dtype int64 but got float32");
}

TEST(CliErrors, MissingInputFile) {
  expect_error(run_dprun(source_path("models/mlp.onnx") + " --input input=/nonexistent.npy"), 1,
               "/nonexistent.npy: file not found");
}

}  // namespace
}  // namespace dprun::testing
