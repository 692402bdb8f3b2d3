// Real kernels (oneDNN MatMul, Conv, pooling; elementwise; normalization) running as
// concurrent replicas: repeated data-parallel runs of the bundled models must give the same
// bytes as one device, every time (catches shared-state races in kernels).
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

#include "engine/parallel/data_parallel.h"
#include "loader/onnx_loader.h"

namespace dprun {
namespace {

std::string model_path(const std::string& name) {
  const char* root = std::getenv("DPRUN_SOURCE_DIR");
  return std::string(root ? root : DPRUN_SOURCE_DIR_DEFAULT) + "/models/" + name + ".onnx";
}

std::vector<Tensor> inputs_for(const Model& model, int64_t batch) {
  std::vector<Tensor> inputs;
  for (const TensorType& type : model.input_types()) {
    Shape shape;
    for (const Dim& d : *type.shape)
      shape.push_back(d.is_known() ? d.value : shape.empty() ? batch : 12);
    Tensor t = Tensor::zeros(shape, type.dtype);
    for (int64_t i = 0; i < t.numel(); ++i) {
      if (type.dtype == DType::Float32)
        t.data<float>()[i] = static_cast<float>((i * 37) % 101) / 50.0f - 1.0f;
      if (type.dtype == DType::Int64) t.data<int64_t>()[i] = (i * 13) % 1000;
    }
    inputs.push_back(t);
  }
  return inputs;
}

class RepeatedParallelRuns : public ::testing::TestWithParam<std::string> {};

TEST_P(RepeatedParallelRuns, AlwaysBitwiseEqualToOneDevice) {
  auto model = std::make_shared<Model>(load_model(model_path(GetParam()), Device::cpu(0)));
  auto inputs = inputs_for(*model, 11);
  DataParallelOptions one;
  one.device_ids = {Device::cpu(0)};
  auto expected = DataParallel(model, one).forward(inputs);
  DataParallelOptions four;
  four.device_ids = {Device::cpu(0), Device::cpu(1), Device::cpu(2), Device::cpu(3)};
  DataParallel parallel(model, four);
  for (int iteration = 0; iteration < 25; ++iteration) {
    auto got = parallel.forward(inputs);
    ASSERT_EQ(got.size(), expected.size());
    for (size_t o = 0; o < got.size(); ++o)
      ASSERT_EQ(std::memcmp(got[o].raw_data(), expected[o].raw_data(), expected[o].nbytes()), 0)
          << GetParam() << " output " << o << " differs at iteration " << iteration;
  }
}
INSTANTIATE_TEST_SUITE_P(BundledModels, RepeatedParallelRuns,
                         ::testing::Values("mlp", "cnn", "transformer"));

}  // namespace
}  // namespace dprun
