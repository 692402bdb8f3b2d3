// Det (ops/linalg/det.cpp): batched 2x2 and 3x3 determinants, a singular matrix, and the non-square
// input it refuses, against determinants worked out by hand.
#include <gtest/gtest.h>

#include "engine/error.h"
#include "op_test_util.h"

namespace dprun {
namespace {

using testing::expect_values;
using testing::make_node;
using testing::run_node;

TEST(LinearAlgebraKernels, BatchedAndSingular) {
  Tensor x = Tensor::from_vector<double>({3, 2, 2}, {1, 2, 3, 4, 0, 1, 1, 0, 2, 4, 1, 2});
  expect_values(run_node(make_node("Det", {"x"}, {"y"}), {x}, 11)[0], {3}, {-2, -1, 0});
  Tensor m = Tensor::from_vector<float>({3, 3}, {2, 0, 1, 1, 3, 2, 1, 1, 1});
  // 2*(3-2) - 0 + 1*(1-3) = 0... use a non-singular one instead.
  Tensor m2 = Tensor::from_vector<float>({3, 3}, {0, 2, 1, 3, 0, 1, 1, 1, 1});
  // det = 0*(0-1) - 2*(3-1) + 1*(3-0) = -1
  expect_values(run_node(make_node("Det", {"x"}, {"y"}), {m2}, 11)[0], {}, {-1});
  expect_values(run_node(make_node("Det", {"x"}, {"y"}), {m}, 11)[0], {}, {0});
  EXPECT_THROW(run_node(make_node("Det", {"x"}, {"y"}),
                        {Tensor::from_vector<float>({2, 3}, {1, 2, 3, 4, 5, 6})}, 11),
               Error);
}

}  // namespace
}  // namespace dprun
