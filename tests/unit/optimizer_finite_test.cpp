// Optimizer::non_finite_parameter names the first parameter an update left holding a NaN or an
// infinity, on every device type: host ranges as they are updated (step() and the fused
// update_range()), accelerator parameters by a read on the device after the step.
#include <gtest/gtest.h>

#include <limits>
#include <optional>
#include <vector>

#include "accelerator_test_util.h"
#include "engine/training/optimizer.h"

namespace dprun::testing {
namespace {

class OptimizerFinite : public DeviceTest {
 protected:
  // Three parameters of 40 elements: the gradient of `bad` holds `value` at element 37.
  void make(std::optional<size_t> bad, float value) {
    parameters_.clear();
    gradients_.clear();
    for (size_t i = 0; i < 3; ++i) {
      std::vector<float> g(40, 0.5f);
      if (bad == i) g[37] = value;
      parameters_.push_back(Tensor::zeros({40}, DType::Float32, device()));
      gradients_.push_back(Tensor::from_vector<float>({40}, g).to(device()));
    }
  }
  std::vector<Tensor> parameters_, gradients_;
};

TEST_P(OptimizerFinite, NamesTheFirstParameterTheStepLeftNotFinite) {
  const float inf = std::numeric_limits<float>::infinity();
  make(std::nullopt, 0);
  Sgd sgd(parameters_, {.lr = 0.1});
  EXPECT_EQ(sgd.non_finite_parameter(), std::nullopt);  // before any step
  sgd.step(gradients_);
  EXPECT_EQ(sgd.non_finite_parameter(), std::nullopt);

  make(1, std::numeric_limits<float>::quiet_NaN());
  Adam adam(parameters_, {.lr = 0.1});
  adam.step(gradients_);
  EXPECT_EQ(adam.non_finite_parameter(), std::optional<size_t>(1));

  make(2, inf);  // lr times a huge gradient: the update overflows
  Sgd huge(parameters_, {.lr = 1e38});
  gradients_[0] = Tensor::from_vector<float>({40}, std::vector<float>(40, 1e-3f)).to(device());
  huge.step(gradients_);
  EXPECT_EQ(huge.non_finite_parameter(), std::optional<size_t>(2));
  // The next step is checked afresh: parameter 2 stays infinite, parameter 0 too now.
  gradients_[0] = Tensor::from_vector<float>({40}, std::vector<float>(40, 1e3f)).to(device());
  huge.step(gradients_);
  EXPECT_EQ(huge.non_finite_parameter(), std::optional<size_t>(0));
}

// The fused pass of the CPU trainer updates ranges concurrently: the lowest index wins.
TEST(OptimizerFiniteRanges, UpdateRangeChecksEachRange) {
  std::vector<Tensor> parameters, gradients;
  for (int i = 0; i < 3; ++i) {
    parameters.push_back(Tensor::zeros({8}, DType::Float64));
    std::vector<double> g(8, 1.0);
    if (i > 0) g[6] = std::numeric_limits<double>::infinity();
    gradients.push_back(Tensor::from_vector<double>({8}, g));
  }
  Sgd sgd(parameters, {.lr = 0.5});
  sgd.begin_step();
  sgd.update_range(2, gradients[2], 0, 8);
  sgd.update_range(0, gradients[0], 0, 8);
  sgd.update_range(1, gradients[1], 0, 4);  // element 6 not yet
  EXPECT_EQ(sgd.non_finite_parameter(), std::optional<size_t>(2));
  sgd.update_range(1, gradients[1], 4, 8);
  EXPECT_EQ(sgd.non_finite_parameter(), std::optional<size_t>(1));
  sgd.begin_step();
  EXPECT_EQ(sgd.non_finite_parameter(), std::nullopt);
}

DPRUN_ON_EVERY_DEVICE(OptimizerFinite);

}  // namespace
}  // namespace dprun::testing
