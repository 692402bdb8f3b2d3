// External data from the command line: every reader refuses a model whose external data leads
// outside its folder with one line and exit 1, writing nothing; `train --save` and `convert`
// write external data past --external-data-threshold, and the files written load, serve and
// resume.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "cli_test_util.h"

namespace dprun::testing {
namespace {

namespace fs = std::filesystem;

const std::string kData = source_path("models/training/mlp_sgd");

void write_file(const std::string& file, const std::string& bytes) {
  std::ofstream(file, std::ios::binary) << bytes;
}

class ExternalDataCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = scratch_path("dprun_external_data_cli");
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "model");
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  fs::path dir_;
};

TEST_F(ExternalDataCli, EveryCommandRefusesDataOutsideTheModelsFolder) {
  // The fuzz corpus's model: y = x + w, w's 8 bytes at ../secret.bin.
  fs::copy_file(source_path("tests/fuzz/corpus/onnx_loader/external_dotdot.onnx"),
                path("model/m.onnx"));
  fs::copy_file(source_path("tests/fuzz/corpus/onnx_loader/external_inside.onnx"),
                path("model/inside.onnx"));
  write_file(path("secret.bin"), std::string(8, 'S'));
  write_file(path("model/w.bin"), std::string(8, '\0'));
  const std::string model = path("model/m.onnx");
  const std::string expected = "dprun: error: " + model +
                               ": tensor 'w': external data location '../secret.bin' leads "
                               "outside the model's folder\n";
  const std::vector<std::string> commands = {
      "run " + model,
      "bench " + model + " --iters 1",
      "inspect " + model,
      "convert " + model + " --save " + path("served.onnx"),
      "train " + model + " --input x=" + kData + ".x.npy --loss none --optimizer sgd --lr 0.1 " +
          "--batch 4 --steps 1 --save " + path("trained.onnx"),
      "train " + model + " --resume --input x=" + kData + ".x.npy --loss none --optimizer sgd " +
          "--lr 0.1 --batch 4 --steps 1 --save " + path("trained.onnx"),
  };
  for (const std::string& command : commands) {
    const CommandResult r = run_dprun(command);
    EXPECT_EQ(r.status, 1) << command;
    EXPECT_EQ(r.output, expected) << command;
  }
  EXPECT_FALSE(fs::exists(path("served.onnx")));
  EXPECT_FALSE(fs::exists(path("trained.onnx")));
  // The same model with its data beside it runs.
  const CommandResult inside = run_dprun("run " + path("model/inside.onnx") + " --devices cpu:0");
  EXPECT_EQ(inside.status, 0) << inside.output;
}

TEST_F(ExternalDataCli, ConvertWritesExternalDataPastTheThreshold) {
  const std::string source = source_path("models/cnn.onnx");
  ASSERT_EQ(run_dprun("convert " + source + " --save " + path("inline.onnx")).status, 0);
  EXPECT_FALSE(fs::exists(path("inline.onnx.data")));
  const CommandResult r = run_dprun("convert " + source + " --save " + path("model/cnn.onnx") +
                                    " --external-data-threshold 0");
  ASSERT_EQ(r.status, 0) << r.output;
  ASSERT_TRUE(fs::exists(path("model/cnn.onnx.data")));
  EXPECT_LT(fs::file_size(path("model/cnn.onnx")), fs::file_size(path("inline.onnx")) / 4);
  // Both forms give the same outputs, bit for bit.
  for (const std::string name : {"inline", "model/cnn"}) {
    const CommandResult run = run_dprun(path(name + ".onnx") + " --devices cpu:0 --batch 2 " +
                                        "--output-dir " + path(name + "_out"));
    ASSERT_EQ(run.status, 0) << run.output;
  }
  for (const auto& entry : fs::directory_iterator(path("inline_out")))
    EXPECT_EQ(read_text(entry.path()), read_text(path("model/cnn_out") / entry.path().filename()))
        << entry.path().filename();
  const CommandResult bad = run_dprun("convert " + source + " --save " + path("x.onnx") +
                                      " --external-data-threshold -1");
  expect_usage_error(bad,
                     "--external-data-threshold must be between 0 and 9223372036854775807, got -1");
}

TEST_F(ExternalDataCli, TrainSavesAndResumesWithExternalData) {
  const std::string common = " --input x=" + kData + ".x.npy --target " + kData +
                             ".target.npy --loss cross_entropy --optimizer adam --lr 0.01 " +
                             "--batch 5 --external-data-threshold 0 --save " + path("out.onnx");
  const CommandResult first =
      run_dprun("train " + kData + ".onnx --steps 2 --checkpoint-every 2" + common);
  ASSERT_EQ(first.status, 0) << first.output;
  for (const char* file : {"out.onnx.data", "out.ckpt.onnx.data"})
    EXPECT_TRUE(fs::exists(path(file))) << file;
  const CommandResult resumed = run_dprun("train " + path("out.ckpt.onnx") +
                                          " --resume --steps 4 --checkpoint-every 2" + common);
  ASSERT_EQ(resumed.status, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("resuming " + path("out.ckpt.onnx") + " at step 3\n"),
            std::string::npos)
      << resumed.output;
  const CommandResult served = run_dprun(path("out.onnx") + " --devices cpu:0 --batch 2");
  EXPECT_EQ(served.status, 0) << served.output;
}

}  // namespace
}  // namespace dprun::testing
