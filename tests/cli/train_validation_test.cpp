// `dprun train --val-input ... --val-target ...`: the validation loss and accuracy after each
// epoch, on CPU devices and on accelerators (simulated ones here, whose loss and scores sit in
// device memory). With a learning rate of 0 and the training rows as the validation set, the
// validation loss is the training step's loss; the accuracy is checked against the argmax of
// the model's logits from `dprun MODEL --output-dir`.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "accelerator_test_util.h"
#include "cli_test_util.h"
#include "loader/npy.h"

namespace dprun::testing {
namespace {

namespace fs = std::filesystem;

double json_number(const std::string& json, const std::string& pattern) {
  std::smatch m;
  EXPECT_TRUE(std::regex_search(json, m, std::regex(pattern))) << pattern << " in " << json;
  return m.empty() ? NAN : std::stod(m[1].str());
}

// The fraction of rows whose largest logit is at the target class.
double accuracy_of(const Tensor& logits, const Tensor& target) {
  const int64_t rows = logits.shape()[0], classes = logits.shape()[1];
  int64_t correct = 0;
  for (int64_t r = 0; r < rows; ++r) {
    int64_t best = 0;
    for (int64_t k = 1; k < classes; ++k)
      if (logits.item_as_double(r * classes + k) > logits.item_as_double(r * classes + best))
        best = k;
    correct += best == static_cast<int64_t>(target.item_as_double(r));
  }
  return static_cast<double>(correct) / static_cast<double>(rows);
}

class TrainValidation : public ::testing::TestWithParam<std::string> {};

TEST_P(TrainValidation, LossAndAccuracyOfTheTrainingRowsWithoutAnUpdate) {
  if (GetParam().find("sim") != std::string::npos) DPRUN_REQUIRE_SIM_KERNELS();
  const std::string data = source_path("models/training/mlp_sgd");
  const fs::path dir = scratch_path("dprun_train_validation");
  fs::create_directories(dir);
  auto r = run_dprun("train " + data + ".onnx --input x=" + data + ".x.npy --target " + data +
                     ".target.npy --loss cross_entropy --optimizer sgd --lr 0 --batch 25 --steps 1"
                     " --val-input x=" +
                     data + ".x.npy --val-target " + data + ".target.npy --devices " + GetParam() +
                     " --save " + (dir / "trained.onnx").string() + " --json " +
                     (dir / "run.json").string());
  ASSERT_EQ(r.status, 0) << r.output;
  const std::string json = read_text(dir / "run.json");
  const double step_loss = json_number(json, R"re("losses": \[([-0-9.e+]+)\])re");
  const double val_loss = json_number(json, R"re("validation": \[\{"loss": ([-0-9.e+]+))re");
  const double val_accuracy = json_number(json, R"re("accuracy": ([-0-9.e+]+)\})re");
  EXPECT_NEAR(val_loss, step_loss, 1e-6 * std::fabs(step_loss));

  auto logits = run_dprun(data + ".onnx --devices cpu:0 --input x=" + data +
                          ".x.npy --output-dir " + (dir / "out").string());
  ASSERT_EQ(logits.status, 0) << logits.output;
  const double want =
      accuracy_of(read_npy((dir / "out" / "logits.npy").string()), read_npy(data + ".target.npy"));
  EXPECT_NEAR(val_accuracy, want, 1e-6);
  EXPECT_NE(r.output.find("val_loss "), std::string::npos) << r.output;
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Devices, TrainValidation,
                         ::testing::Values("cpu:0", "cpu:0,cpu:1", "sim:0", "sim:0,sim:1"),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& c : name)
                             if (c == ':' || c == ',') c = '_';
                           return name;
                         });

}  // namespace
}  // namespace dprun::testing
