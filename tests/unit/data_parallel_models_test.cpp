// Real kernels (oneDNN MatMul, Conv, pooling; elementwise; normalization) running as
// concurrent replicas: repeated data-parallel runs of the bundled models must give the same
// bytes as one device, every time (catches shared-state races in kernels).
#include <gtest/gtest.h>

#include <cstring>

#include "bundled_model_util.h"
#include "engine/parallel/data_parallel.h"
#include "loader/onnx_loader.h"

namespace dprun {
namespace {

class RepeatedParallelRuns : public ::testing::TestWithParam<std::string> {};

TEST_P(RepeatedParallelRuns, AlwaysBitwiseEqualToOneDevice) {
  auto model =
      std::make_shared<Model>(load_model(testing::bundled_model_path(GetParam()), Device::cpu(0)));
  auto inputs = testing::deterministic_inputs(*model, 11);
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
