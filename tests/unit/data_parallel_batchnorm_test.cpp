// BatchNormalization in training mode through the loader and DataParallel: the running
// statistics are updated in place from replica 0's chunk only (PyTorch's documented
// behaviour), checked against hand-computed values.
#include <gtest/gtest.h>

#include <filesystem>

#include "engine/parallel/data_parallel.h"
#include "loader/onnx_loader.h"

namespace dprun {
namespace {

std::string write_bn_model() {
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
  std::string path = (std::filesystem::temp_directory_path() / "dprun_bn_training.onnx").string();
  save_graph(g, {}, path);
  return path;
}

TEST(DataParallelBatchNorm, RunningStatisticsComeFromReplicaZero) {
  std::string path = write_bn_model();
  auto model = std::make_shared<Model>(load_model(path, Device::cpu(0)));
  ASSERT_EQ(model->graph().state_updates.at("running_mean"), "mean");
  DataParallelOptions options;
  options.device_ids = {Device::cpu(0), Device::cpu(1)};
  DataParallel parallel(model, options);
  // Chunk 0 = {0, 2}: mean 1, population variance 1. Chunk 1 = {100, 300}: ignored.
  Tensor x = Tensor::from_vector<float>({4, 1}, {0, 2, 100, 300});
  auto out = parallel.forward({x});
  // momentum 0.9: 10 * 0.9 + 1 * 0.1 = 9.1; variance 1 * 0.9 + 1 * 0.1 = 1.
  EXPECT_FLOAT_EQ(model->parameter("mean").data<float>()[0], 9.1f);
  EXPECT_FLOAT_EQ(model->parameter("var").data<float>()[0], 1.0f);
  // Each replica normalised with its own batch statistics: chunk 0 gives -1, +1 (eps aside).
  EXPECT_NEAR(out[0].data<float>()[0], -1.0f, 1e-4);
  EXPECT_NEAR(out[0].data<float>()[3], 1.0f, 1e-4);
  // The update bumped the version, so replica 1 is refreshed with the new statistics.
  parallel.forward({x});
  EXPECT_TRUE(parallel.last_run().replicated);
  EXPECT_FLOAT_EQ(model->parameter("mean").data<float>()[0], 9.1f * 0.9f + 0.1f);
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace dprun
