// BatchNormalization in training mode through the loader and DataParallel: the running
// statistics are updated in place from replica 0's chunk only (PyTorch's documented
// behaviour), checked against hand-computed values. On CPU devices and on every accelerator
// (the simulated devices, and CUDA GPUs where present), where the update is copied into the
// parameter's device memory.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "accelerator_test_util.h"
#include "engine/parallel/data_parallel.h"
#include "loader/onnx_loader.h"

namespace dprun {
namespace {

std::string write_bn_model(DeviceType type) {
  Graph g;
  g.name = "bn_training";
  g.opset_imports[""] = 15;
  SymbolicShape x_shape{Dim::named("batch"), Dim::known(1)};
  g.inputs.push_back({"x", {DType::Float32, x_shape}});
  g.initializers["scale"] = Tensor::from_vector<float>({1}, {1});
  g.initializers["bias"] = Tensor::from_vector<float>({1}, {0});
  g.initializers["mean"] = Tensor::from_vector<float>({1}, {10});
  g.initializers["var"] = Tensor::from_vector<float>({1}, {1});
  Node bn;
  bn.name = "bn";
  bn.op_type = "BatchNormalization";
  bn.inputs = {"x", "scale", "bias", "mean", "var"};
  bn.outputs = {"y", "running_mean", "running_var"};
  bn.attributes["training_mode"] = Attribute::of_int(1);
  g.nodes.push_back(bn);
  g.outputs.push_back({"y", {DType::Float32, x_shape}});
  // One file per device type and process: ctest runs the instances side by side.
  std::string path = (std::filesystem::temp_directory_path() /
                      ("dprun_bn_training_" + std::string(device_type_name(type)) + "_" +
                       std::to_string(getpid()) + ".onnx"))
                         .string();
  save_graph(g, {}, path);
  return path;
}

float value_of(const Tensor& t) {
  return t.to(Device::cpu()).data<float>()[0];
}

class DataParallelBatchNorm : public ::testing::TestWithParam<DeviceType> {};

TEST_P(DataParallelBatchNorm, RunningStatisticsComeFromReplicaZero) {
  const std::string why = testing::accelerator_unusable_reason(GetParam());
  if (!why.empty())
    GTEST_SKIP() << "needs a " << device_type_name(GetParam()) << " device: " << why;
  const Device first{GetParam(), 0}, second{GetParam(), 1};
  std::string path = write_bn_model(GetParam());
  auto model = std::make_shared<Model>(load_model(path, first));
  ASSERT_EQ(model->graph().state_updates.at("running_mean"), "mean");
  DataParallelOptions options;
  options.device_ids = {first, second};
  DataParallel parallel(model, options);
  // Chunk 0 = {0, 2}: mean 1, population variance 1. Chunk 1 = {100, 300}: ignored.
  Tensor x = Tensor::from_vector<float>({4, 1}, {0, 2, 100, 300});
  const Tensor out = parallel.forward({x})[0].to(Device::cpu());
  // momentum 0.9: 10 * 0.9 + 1 * 0.1 = 9.1; variance 1 * 0.9 + 1 * 0.1 = 1.
  EXPECT_FLOAT_EQ(value_of(model->parameter("mean")), 9.1f);
  EXPECT_FLOAT_EQ(value_of(model->parameter("var")), 1.0f);
  EXPECT_EQ(model->parameter("mean").device(), first);
  // Each replica normalised with its own batch statistics: chunk 0 gives -1, +1 (eps aside).
  EXPECT_NEAR(out.data<float>()[0], -1.0f, 1e-4);
  EXPECT_NEAR(out.data<float>()[3], 1.0f, 1e-4);
  // The update bumped the version, so replica 1 is refreshed with the new statistics.
  parallel.forward({x});
  EXPECT_TRUE(parallel.last_run().replicated);
  EXPECT_FLOAT_EQ(value_of(model->parameter("mean")), 9.1f * 0.9f + 0.1f);
  std::filesystem::remove(path);
}

std::vector<DeviceType> every_device_type() {
  std::vector<DeviceType> types = {DeviceType::CPU};
  for (DeviceType t : testing::accelerator_types()) types.push_back(t);
  return types;
}

INSTANTIATE_TEST_SUITE_P(OnEveryDeviceType, DataParallelBatchNorm,
                         ::testing::ValuesIn(every_device_type()), [](const auto& info) {
                           return std::string(device_type_name(info.param));
                         });

}  // namespace
}  // namespace dprun
