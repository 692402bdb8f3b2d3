// NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss kernels (ops/loss/loss.cpp): every
// reduction, class weights, ignore_index and spatial dimensions against hand-computed values and
// a naive log-softmax written here, and the inputs and attributes they refuse.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "engine/error.h"
#include "op_test_util.h"

namespace dprun {
namespace {

using testing::expect_values;
using testing::make_node;
using testing::run_node;

TEST(LossKernels, NllReductions) {
  // input [2, 3], target [2]: loss = -x[n, t[n]].
  Tensor x = Tensor::from_vector<float>({2, 3}, {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f});
  Tensor t = Tensor::from_vector<int64_t>({2}, {2, 0});
  Node n = make_node("NegativeLogLikelihoodLoss", {"x", "t"}, {"y"});
  n.attributes["reduction"] = Attribute::of_string("none");
  expect_values(run_node(n, {x, t}, 13)[0], {2}, {-0.3, -0.4});
  n.attributes["reduction"] = Attribute::of_string("sum");
  expect_values(run_node(n, {x, t}, 13)[0], {}, {-0.7});
  n.attributes["reduction"] = Attribute::of_string("mean");
  expect_values(run_node(n, {x, t}, 13)[0], {}, {-0.35});
}

TEST(LossKernels, NllWeightsIgnoreIndexAndSpatialDims) {
  // input [1, 2, 3] (N, C, d1), target [1, 3] with one ignored (-1) element.
  Tensor x = Tensor::from_vector<double>({1, 2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor t = Tensor::from_vector<int32_t>({1, 3}, {1, -1, 0});
  Tensor w = Tensor::from_vector<double>({2}, {0.5, 2.0});
  Node n = make_node("NegativeLogLikelihoodLoss", {"x", "t", "w"}, {"y"});
  n.attributes["ignore_index"] = Attribute::of_int(-1);
  n.attributes["reduction"] = Attribute::of_string("none");
  // d=0: class 1 -> -x[0,1,0]*2 = -8; d=1 ignored; d=2: class 0 -> -x[0,0,2]*0.5 = -1.5.
  expect_values(run_node(n, {x, t, w}, 13)[0], {1, 3}, {-8, 0, -1.5});
  n.attributes["reduction"] = Attribute::of_string("mean");
  expect_values(run_node(n, {x, t, w}, 13)[0], {}, {-9.5 / 2.5});
  // Without weights "mean" divides by the count of non-ignored elements.
  Node nw = make_node("NegativeLogLikelihoodLoss", {"x", "t"}, {"y"});
  nw.attributes["ignore_index"] = Attribute::of_int(-1);
  expect_values(run_node(nw, {x, t}, 13)[0], {}, {-(4.0 + 3.0) / 2});
}

TEST(LossKernels, NllErrors) {
  Tensor x = Tensor::from_vector<float>({2, 3}, {0, 0, 0, 0, 0, 0});
  Node n = make_node("NegativeLogLikelihoodLoss", {"x", "t"}, {"y"});
  EXPECT_THROW(run_node(n, {x, Tensor::from_vector<int64_t>({2}, {0, 3})}, 13), Error);
  EXPECT_THROW(run_node(n, {x, Tensor::from_vector<int64_t>({3}, {0, 1, 2})}, 13), Error);
  n.attributes["reduction"] = Attribute::of_string("avg");
  EXPECT_THROW(run_node(n, {x, Tensor::from_vector<int64_t>({2}, {0, 1})}, 13), Error);
}

TEST(LossKernels, SoftmaxCrossEntropyMatchesNaive) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> dist(-2, 2);
  const int64_t N = 2, C = 3, D = 4;
  std::vector<float> xv(N * C * D);
  for (auto& v : xv) v = dist(rng);
  std::vector<int64_t> tv = {0, 2, 1, 5, 2, 2, 0, 1};  // 5 is the ignore_index
  std::vector<float> wv = {0.2f, 1.0f, 3.0f};
  Tensor x = Tensor::from_vector<float>({N, C, D}, xv);
  Tensor t = Tensor::from_vector<int64_t>({N, D}, tv);
  Tensor w = Tensor::from_vector<float>({C}, wv);
  // Naive log-softmax over C and weighted mean.
  std::vector<double> lp(N * C * D);
  double sum = 0, wsum = 0;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t d = 0; d < D; ++d) {
      double z = 0;
      for (int64_t c = 0; c < C; ++c) z += std::exp(xv[(n * C + c) * D + d]);
      for (int64_t c = 0; c < C; ++c)
        lp[(n * C + c) * D + d] = xv[(n * C + c) * D + d] - std::log(z);
      int64_t tt = tv[n * D + d];
      if (tt == 5) continue;
      sum += -lp[(n * C + tt) * D + d] * wv[tt];
      wsum += wv[tt];
    }
  Node node = make_node("SoftmaxCrossEntropyLoss", {"x", "t", "w"}, {"loss", "log_prob"});
  node.attributes["ignore_index"] = Attribute::of_int(5);
  auto out = run_node(node, {x, t, w}, 13);
  expect_values(out[0], {}, {sum / wsum}, 1e-5);
  expect_values(out[1], {N, C, D}, lp, 1e-5);
  node.attributes["reduction"] = Attribute::of_string("sum");
  expect_values(run_node(node, {x, t, w}, 13)[0], {}, {sum}, 1e-4);
}

}  // namespace
}  // namespace dprun
