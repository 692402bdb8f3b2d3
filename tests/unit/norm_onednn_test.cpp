// oneDNN fast paths of BatchNormalization, LayerNormalization and InstanceNormalization
// compared with the reference kernels on random inputs, and the cases they decline.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <random>
#include <thread>

#include "engine/error.h"
#include "kernel_test_util.h"
#include "op_test_util.h"

namespace dprun {
namespace {

using testing::make_node;
using testing::run_impl;
using testing::run_node;

Tensor random_tensor(const Shape& shape, std::mt19937& rng, float lo = -1.f, float hi = 1.f) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(static_cast<size_t>(shape_numel(shape)));
  for (float& x : v) x = dist(rng);
  return Tensor::from_vector<float>(shape, v);
}

void expect_close(const Tensor& fast, const Tensor& ref, const std::string& what) {
  ASSERT_EQ(fast.dtype(), ref.dtype()) << what;
  ASSERT_EQ(shape_to_string(fast.shape()), shape_to_string(ref.shape())) << what;
  for (int64_t i = 0; i < ref.numel(); ++i) {
    const double r = ref.item_as_double(i), f = fast.item_as_double(i);
    ASSERT_NEAR(f, r, 1e-5 * (1 + std::abs(r))) << what << " element " << i;
  }
}

/// Runs `node` through the "onednn" and "reference" kernels and compares every output.
void expect_impls_agree(const Node& node, const std::vector<Tensor>& inputs, int64_t opset,
                        const std::string& what, int threads = 1) {
  auto fast = run_impl(node, inputs, opset, "onednn", threads);
  auto ref = run_impl(node, inputs, opset, "reference", threads);
  ASSERT_EQ(fast.size(), ref.size());
  for (size_t o = 0; o < ref.size(); ++o) {
    if (node.outputs[o].empty()) continue;
    expect_close(fast[o], ref[o], what + " output " + std::to_string(o));
  }
}

// ------------------------------------------------------------------- BatchNormalization

std::vector<Tensor> bn_inputs(const Shape& x_shape, std::mt19937& rng) {
  const Shape c = {x_shape[1]};
  return {random_tensor(x_shape, rng, -3.f, 3.f), random_tensor(c, rng, 0.5f, 2.f),
          random_tensor(c, rng), random_tensor(c, rng), random_tensor(c, rng, 0.1f, 2.f)};
}

TEST(NormOnednn, BatchNormMatchesReference) {
  std::mt19937 rng(11);
  const std::vector<Shape> shapes = {{2, 3},          {4, 5, 7},       {2, 3, 4, 5},
                                     {3, 7, 11, 13},  {1, 5, 3, 3, 3}, {2, 3, 2, 2, 2, 3},
                                     {1, 16, 17, 19}, {2, 64, 9, 9}};
  for (int64_t opset : {6, 7, 9, 14, 15}) {
    for (float eps : {1e-5f, 1e-3f, 0.1f}) {
      Node n = make_node("BatchNormalization", {"x", "s", "b", "m", "v"}, {"y"});
      n.attributes["epsilon"] = Attribute::of_float(eps);
      if (opset >= 14) n.attributes["training_mode"] = Attribute::of_int(0);
      for (const Shape& shape : shapes)
        expect_impls_agree(n, bn_inputs(shape, rng), opset,
                           "opset " + std::to_string(opset) + " eps " + std::to_string(eps) +
                               " shape " + shape_to_string(shape));
    }
  }
  // Intra-op threads.
  Node n = make_node("BatchNormalization", {"x", "s", "b", "m", "v"}, {"y"});
  expect_impls_agree(n, bn_inputs({4, 32, 20, 20}, rng), 15, "2 threads", 2);
}

TEST(NormOnednn, BatchNormFallsBackForUnsupportedInputs) {
  std::mt19937 rng(12);
  Node n = make_node("BatchNormalization", {"x", "s", "b", "m", "v"}, {"y"});
  // Float64 statistics (opset 15 allows T2 != T): the onednn kernel runs the reference.
  auto in = bn_inputs({2, 3, 4}, rng);
  for (size_t i = 3; i <= 4; ++i) {
    std::vector<double> v;
    for (int64_t j = 0; j < in[i].numel(); ++j) v.push_back(in[i].item_as_double(j));
    in[i] = Tensor::from_vector<double>(in[i].shape(), v);
  }
  expect_impls_agree(n, in, 15, "float64 statistics");
  // Wrong parameter size: the reference's error.
  auto bad = bn_inputs({2, 3, 4}, rng);
  bad[1] = random_tensor({4}, rng);
  EXPECT_THROW(run_impl(n, bad, 15, "onednn"), Error);
  EXPECT_THROW(run_impl(n, {random_tensor({3}, rng), bad[2], bad[2], bad[2], bad[2]}, 15, "onednn"),
               Error);  // rank 1
}

TEST(NormOnednn, BatchNormTrainingIsDeclinedAndStillRuns) {
  std::mt19937 rng(13);
  const auto in = bn_inputs({2, 3, 4, 5}, rng);
  // Opset 14+: training_mode=1.
  Node train = make_node("BatchNormalization", {"x", "s", "b", "m", "v"}, {"y", "rm", "rv"});
  train.attributes["training_mode"] = Attribute::of_int(1);
  EXPECT_THROW(run_impl(train, in, 15, "onednn"), Error);
  auto via_registry = run_node(train, in, 15);
  auto ref = run_impl(train, in, 15, "reference");
  ASSERT_EQ(via_registry.size(), 3u);
  for (size_t o = 0; o < 3; ++o) expect_close(via_registry[o], ref[o], "training output");
  // The batch statistics are used: each channel of Y has mean B[c] and variance ~scale[c]^2.
  const int64_t S = 20;
  for (int64_t c = 0; c < 3; ++c) {
    double sum = 0;
    for (int64_t nn = 0; nn < 2; ++nn)
      for (int64_t s = 0; s < S; ++s) sum += via_registry[0].item_as_double((nn * 3 + c) * S + s);
    EXPECT_NEAR(sum / (2 * S), in[2].item_as_double(c), 1e-4);
  }
  // training_mode=1 with a single output is still training.
  Node train1 = make_node("BatchNormalization", {"x", "s", "b", "m", "v"}, {"y"});
  train1.attributes["training_mode"] = Attribute::of_int(1);
  EXPECT_THROW(run_impl(train1, in, 14, "onednn"), Error);
  expect_close(run_node(train1, in, 14)[0], via_registry[0], "training, one output");
  // Before opset 14, extra outputs select training.
  Node old = make_node("BatchNormalization", {"x", "s", "b", "m", "v"},
                       {"y", "mean", "var", "saved_mean", "saved_var"});
  EXPECT_THROW(run_impl(old, in, 9, "onednn"), Error);
  auto old_out = run_node(old, in, 9);
  auto old_ref = run_impl(old, in, 9, "reference");
  for (size_t o = 0; o < 5; ++o) expect_close(old_out[o], old_ref[o], "opset 9 training");
  // spatial=0 (per-activation parameters) before opset 9.
  Node spatial = make_node("BatchNormalization", {"x", "s", "b", "m", "v"}, {"y"});
  spatial.attributes["spatial"] = Attribute::of_int(0);
  EXPECT_THROW(run_impl(spatial, in, 7, "onednn"), Error);
  std::vector<Tensor> per_act = {in[0]};
  for (size_t i = 1; i <= 4; ++i)
    per_act.push_back(random_tensor({3, 4, 5}, rng, i == 4 ? 0.1f : -1.f, 1.f));
  expect_close(run_node(spatial, per_act, 7)[0], run_impl(spatial, per_act, 7, "reference")[0],
               "spatial=0");
}

// One kernel object shared by concurrent callers (replicas) with two shapes.
TEST(NormOnednn, BatchNormSharedKernelConcurrently) {
  Node n = make_node("BatchNormalization", {"x", "s", "b", "m", "v"}, {"y"});
  KernelInfo info{n, 15, DeviceType::CPU, {}, {}};
  auto fast = KernelRegistry::instance().create(info, nullptr, "onednn");
  ASSERT_NE(fast, nullptr);
  std::mt19937 rng(14);
  std::vector<std::vector<Tensor>> inputs = {bn_inputs({2, 8, 9, 9}, rng),
                                             bn_inputs({3, 8, 5, 7}, rng)};
  std::vector<Tensor> expected;
  for (const auto& in : inputs) expected.push_back(run_impl(n, in, 15, "reference")[0]);
  std::atomic<int> mismatches{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      std::unique_ptr<ExecutionContext> execution = testing::cpu_execution(1);
      for (int r = 0; r < 20; ++r) {
        const auto& in = inputs[static_cast<size_t>((t + r) % 2)];
        const Tensor& want = expected[static_cast<size_t>((t + r) % 2)];
        std::vector<const Tensor*> ptrs = {&in[0], &in[1], &in[2], &in[3], &in[4]};
        std::vector<Tensor> outs(1);
        KernelContext ctx(n, *execution, ptrs, outs);
        fast->compute(ctx);
        for (int64_t i = 0; i < want.numel(); ++i)
          if (std::abs(outs[0].item_as_double(i) - want.item_as_double(i)) >
              1e-5 * (1 + std::abs(want.item_as_double(i)))) {
            ++mismatches;
            break;
          }
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches.load(), 0);
}

// ------------------------------------------------------------------- LayerNormalization

TEST(NormOnednn, LayerNormMatchesReference) {
  std::mt19937 rng(21);
  struct Case {
    Shape shape;
    int64_t axis;
  };
  const std::vector<Case> cases = {
      {{4, 7}, -1},      {{4, 7}, 0},        {{2, 3, 5}, -1},  {{2, 3, 5}, -2},   {{2, 3, 5}, 0},
      {{3, 5, 4, 6}, 1}, {{3, 5, 4, 6}, -1}, {{2, 9, 33}, -1}, {{5, 1, 130}, -2}, {{1, 1}, -1}};
  for (float eps : {1e-5f, 1e-3f, 0.5f})
    for (const Case& c : cases)
      for (bool with_bias : {true, false}) {
        Node n = make_node("LayerNormalization", {"x", "s", with_bias ? "b" : ""}, {"y"});
        n.attributes["axis"] = Attribute::of_int(c.axis);
        n.attributes["epsilon"] = Attribute::of_float(eps);
        const int64_t a = c.axis < 0 ? c.axis + static_cast<int64_t>(c.shape.size()) : c.axis;
        const Shape norm(c.shape.begin() + a, c.shape.end());
        std::vector<Tensor> in = {random_tensor(c.shape, rng, -4.f, 4.f), random_tensor(norm, rng)};
        if (with_bias) in.push_back(random_tensor(norm, rng));
        expect_impls_agree(n, in, 17,
                           "shape " + shape_to_string(c.shape) + " axis " + std::to_string(c.axis) +
                               " eps " + std::to_string(eps) + (with_bias ? " bias" : ""));
      }
  // Opset 1 registration (contrib-style use) and intra-op threads.
  Node n = make_node("LayerNormalization", {"x", "s", "b"}, {"y"});
  expect_impls_agree(
      n, {random_tensor({16, 64, 96}, rng), random_tensor({96}, rng), random_tensor({96}, rng)}, 1,
      "opset 1, 2 threads", 2);
}

TEST(NormOnednn, LayerNormStatisticsOutputs) {
  std::mt19937 rng(22);
  for (int64_t axis : {-1, -2, 1}) {
    for (int mask = 1; mask <= 3; ++mask) {
      Node n = make_node("LayerNormalization", {"x", "s", "b"},
                         {"y", mask & 1 ? "mean" : "", mask & 2 ? "inv_std" : ""});
      n.attributes["axis"] = Attribute::of_int(axis);
      const Shape shape = {2, 3, 4, 5};
      const int64_t a = axis < 0 ? axis + 4 : axis;
      const Shape norm(shape.begin() + a, shape.end());
      expect_impls_agree(n,
                         {random_tensor(shape, rng, -2.f, 5.f), random_tensor(norm, rng),
                          random_tensor(norm, rng)},
                         17, "axis " + std::to_string(axis) + " outputs " + std::to_string(mask));
    }
  }
}

TEST(NormOnednn, LayerNormFallsBack) {
  std::mt19937 rng(23);
  Node n = make_node("LayerNormalization", {"x", "s", "b"}, {"y"});
  n.attributes["axis"] = Attribute::of_int(-2);
  const Tensor x = random_tensor({2, 4, 5}, rng);
  // Broadcast Scale / B (shape [5] or [1, 5] for normalized shape [4, 5]) run the reference.
  expect_impls_agree(n, {x, random_tensor({5}, rng), random_tensor({4, 5}, rng)}, 17,
                     "broadcast scale");
  expect_impls_agree(n, {x, random_tensor({4, 5}, rng), random_tensor({1, 5}, rng)}, 17,
                     "broadcast bias with a leading 1");
  // A parameter of higher rank than the normalized shape is an error.
  EXPECT_THROW(
      run_impl(n, {x, random_tensor({1, 4, 5}, rng), random_tensor({4, 5}, rng)}, 17, "onednn"),
      Error);
  // Float64 input is not taken by the onednn kernel at all.
  Node d = make_node("LayerNormalization", {"x", "s"}, {"y"});
  const Tensor xd = Tensor::from_vector<double>({2, 2}, {1, 2, 3, 5});
  const Tensor sd = Tensor::from_vector<double>({2}, {1, 1});
  EXPECT_THROW(run_impl(d, {xd, sd}, 17, "onednn"), Error);
  auto yd = run_node(d, {xd, sd}, 17);
  EXPECT_NEAR(yd[0].item_as_double(0), -1.0, 1e-4);
  EXPECT_NEAR(yd[0].item_as_double(3), 1.0, 1e-4);
  // Errors still come from the reference kernel.
  n.attributes["axis"] = Attribute::of_int(3);
  EXPECT_THROW(run_impl(n, {x, random_tensor({5}, rng), random_tensor({5}, rng)}, 17, "onednn"),
               Error);
  n.attributes["axis"] = Attribute::of_int(-1);
  EXPECT_THROW(run_impl(n, {x, random_tensor({4}, rng), random_tensor({5}, rng)}, 17, "onednn"),
               Error);
}

// ---------------------------------------------------------------- InstanceNormalization

TEST(NormOnednn, InstanceNormMatchesReference) {
  std::mt19937 rng(31);
  const std::vector<Shape> shapes = {{2, 3, 4, 5},       {1, 1, 7},       {3, 5},
                                     {2, 4, 3, 2, 2, 2}, {2, 16, 17, 19}, {1, 3, 5, 6, 7}};
  for (float eps : {1e-5f, 1e-2f})
    for (const Shape& shape : shapes) {
      Node n = make_node("InstanceNormalization", {"x", "s", "b"}, {"y"});
      n.attributes["epsilon"] = Attribute::of_float(eps);
      const Shape c = {shape[1]};
      expect_impls_agree(
          n, {random_tensor(shape, rng, -3.f, 5.f), random_tensor(c, rng), random_tensor(c, rng)},
          6, "shape " + shape_to_string(shape) + " eps " + std::to_string(eps));
    }
  Node n = make_node("InstanceNormalization", {"x", "s", "b"}, {"y"});
  expect_impls_agree(
      n, {random_tensor({4, 8, 30, 30}, rng), random_tensor({8}, rng), random_tensor({8}, rng)}, 1,
      "opset 1, 2 threads", 2);
  EXPECT_THROW(
      run_impl(n, {random_tensor({2, 3, 4}, rng), random_tensor({4}, rng), random_tensor({3}, rng)},
               6, "onednn"),
      Error);
}

}  // namespace
}  // namespace dprun
