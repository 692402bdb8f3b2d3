// Softmax family, BatchNormalization, LayerNormalization, InstanceNormalization,
// GroupNormalization, LpNormalization, MeanVarianceNormalization, LRN and Einsum against
// naive references written here.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "op_test_util.h"
#include "unit/reduce_norm_test_util.h"

namespace dprun {
namespace {

using testing::make_node;
using testing::run_node;
using namespace reduce_norm_test;

// ---------------------------------------------------------------- Softmax family

/// Naive softmax-like op over [outer, D, inner] (the 2-D coercion is inner == 1).
std::vector<double> naive_softmax(const Tensor& x, int64_t outer, int64_t D, int64_t inner,
                                  const std::string& op) {
  std::vector<double> y(static_cast<size_t>(x.numel()));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      auto at = [&](int64_t d) { return (o * D + d) * inner + i; };
      double mx = -INFINITY;
      int64_t best = 0;
      for (int64_t d = 0; d < D; ++d) {
        if (x.item_as_double(at(d)) > mx) best = d;
        mx = std::max(mx, x.item_as_double(at(d)));
      }
      double sum = 0;
      for (int64_t d = 0; d < D; ++d) sum += std::exp(x.item_as_double(at(d)) - mx);
      for (int64_t d = 0; d < D; ++d) {
        const double v = x.item_as_double(at(d));
        y[static_cast<size_t>(at(d))] = op == "Softmax"      ? std::exp(v - mx) / sum
                                        : op == "LogSoftmax" ? v - mx - std::log(sum)
                                                             : (d == best ? 1.0 : 0.0);
      }
    }
  return y;
}

TEST(SoftmaxTest, Opset13AlongOneAxis) {
  const Tensor x = random_tensor({3, 4, 5}, 11, -5, 5);
  for (const std::string op : {"Softmax", "LogSoftmax", "Hardmax"}) {
    for (int64_t axis : {0, 1, 2, -1, -3}) {
      SCOPED_TRACE(op + " axis " + std::to_string(axis));
      Node n = make_node(op, {"x"}, {"y"});
      n.attributes["axis"] = Attribute::of_int(axis);
      const int64_t a = axis < 0 ? axis + 3 : axis;
      const int64_t outer = dims_product_test(x.shape(), 0, a),
                    inner = dims_product_test(x.shape(), a + 1, 3);
      expect_close(run_node(n, {x}, 13)[0], x.shape(),
                   naive_softmax(x, outer, x.shape()[a], inner, op));
    }
    // Default axis is -1.
    Node d = make_node(op, {"x"}, {"y"});
    expect_close(run_node(d, {x}, 13)[0], x.shape(), naive_softmax(x, 12, 5, 1, op));
  }
}

TEST(SoftmaxTest, BeforeOpset13CoercesTo2D) {
  const Tensor x = random_tensor({2, 3, 4}, 12, -5, 5);
  for (const std::string op : {"Softmax", "LogSoftmax", "Hardmax"}) {
    SCOPED_TRACE(op);
    Node n = make_node(op, {"x"}, {"y"});  // default axis 1: rows of 3 * 4
    expect_close(run_node(n, {x}, 11)[0], x.shape(), naive_softmax(x, 2, 12, 1, op));
    n.attributes["axis"] = Attribute::of_int(0);
    expect_close(run_node(n, {x}, 1)[0], x.shape(), naive_softmax(x, 1, 24, 1, op));
    n.attributes["axis"] = Attribute::of_int(-1);
    expect_close(run_node(n, {x}, 11)[0], x.shape(), naive_softmax(x, 6, 4, 1, op));
  }
}

TEST(SoftmaxTest, LargeValuesAndFloat64AndBigRows) {
  const Tensor x = Tensor::from_vector<float>({1, 3}, {1000, 1001, 1002});
  expect_close(run_node(make_node("Softmax", {"x"}, {"y"}), {x}, 13)[0], {1, 3},
               naive_softmax(x, 1, 3, 1, "Softmax"));
  expect_close(run_node(make_node("LogSoftmax", {"x"}, {"y"}), {x}, 13)[0], {1, 3},
               naive_softmax(x, 1, 3, 1, "LogSoftmax"));
  const Tensor xd = Tensor::from_vector<double>({2, 2}, {0.5, -1, 3, 3});
  Tensor yd = run_node(make_node("Softmax", {"x"}, {"y"}), {xd}, 13)[0];
  EXPECT_EQ(yd.dtype(), DType::Float64);
  expect_close(yd, {2, 2}, naive_softmax(xd, 2, 2, 1, "Softmax"), 1e-12);
  const Tensor big = random_tensor({64, 1000}, 13, -10, 10);
  expect_close(run_node(make_node("Softmax", {"x"}, {"y"}), {big}, 13)[0], big.shape(),
               naive_softmax(big, 64, 1000, 1, "Softmax"));
  Node n = make_node("LogSoftmax", {"x"}, {"y"});
  n.attributes["axis"] = Attribute::of_int(0);
  expect_close(run_node(n, {big}, 13)[0], big.shape(),
               naive_softmax(big, 1, 64, 1000, "LogSoftmax"));
}

TEST(SoftmaxTest, HardmaxTiesPickFirst) {
  const Tensor x = Tensor::from_vector<float>({2, 3}, {1, 3, 3, 2, 2, 2});
  expect_close(run_node(make_node("Hardmax", {"x"}, {"y"}), {x}, 13)[0], {2, 3},
               {0, 1, 0, 1, 0, 0});
}

TEST(SoftmaxTest, Errors) {
  Node n = make_node("Softmax", {"x"}, {"y"});
  n.attributes["axis"] = Attribute::of_int(3);
  EXPECT_THROW(run_node(n, {random_tensor({2, 3, 4}, 14)}, 13), Error);
  n.attributes["axis"] = Attribute::of_int(-4);
  EXPECT_THROW(run_node(n, {random_tensor({2, 3, 4}, 14)}, 11), Error);
  EXPECT_THROW(
      run_node(make_node("Softmax", {"x"}, {"y"}), {Tensor::from_vector<int32_t>({2}, {1, 2})}, 13),
      Error);
}

// ---------------------------------------------------------------- BatchNormalization

TEST(BatchNormTest, InferenceMatchesNaive) {
  const Tensor x = random_tensor({2, 3, 4, 5}, 21);
  const Tensor scale = random_tensor({3}, 22), bias = random_tensor({3}, 23),
               mean = random_tensor({3}, 24), var = random_tensor({3}, 25, 0.5f, 2.f);
  const double eps = 1e-2;
  std::vector<double> want(static_cast<size_t>(x.numel()));
  for (int64_t i = 0; i < x.numel(); ++i) {
    const int64_t c = (i / 20) % 3;
    want[i] = (x.item_as_double(i) - mean.item_as_double(c)) /
                  std::sqrt(var.item_as_double(c) + eps) * scale.item_as_double(c) +
              bias.item_as_double(c);
  }
  for (int64_t opset : {6, 7, 9, 14, 15}) {
    SCOPED_TRACE(opset);
    Node n = make_node("BatchNormalization", {"x", "s", "b", "m", "v"}, {"y"});
    n.attributes["epsilon"] = Attribute::of_float(static_cast<float>(eps));
    if (opset < 7) n.attributes["is_test"] = Attribute::of_int(1);
    expect_close(run_node(n, {x, scale, bias, mean, var}, opset)[0], x.shape(), want);
  }
}

TEST(BatchNormTest, PerActivationBeforeOpset9) {
  const Tensor x = random_tensor({2, 2, 3}, 26);
  const Tensor scale = random_tensor({2, 3}, 27), bias = random_tensor({2, 3}, 28),
               mean = random_tensor({2, 3}, 29), var = random_tensor({2, 3}, 30, 0.5f, 2.f);
  std::vector<double> want(12);
  for (int64_t i = 0; i < 12; ++i) {
    const int64_t p = i % 6;
    want[i] = (x.item_as_double(i) - mean.item_as_double(p)) /
                  std::sqrt(var.item_as_double(p) + 1e-5) * scale.item_as_double(p) +
              bias.item_as_double(p);
  }
  Node n = make_node("BatchNormalization", {"x", "s", "b", "m", "v"}, {"y"});
  n.attributes["spatial"] = Attribute::of_int(0);
  expect_close(run_node(n, {x, scale, bias, mean, var}, 7)[0], x.shape(), want);
  // From opset 9 the parameters must be per channel.
  EXPECT_THROW(run_node(n, {x, scale, bias, mean, var}, 9), Error);
}

TEST(BatchNormTest, TrainingModeUsesBatchStatisticsAndUpdatesRunningOnes) {
  const Tensor x = random_tensor({3, 2, 4}, 31);
  const Tensor scale = random_tensor({2}, 32), bias = random_tensor({2}, 33),
               mean = random_tensor({2}, 34), var = random_tensor({2}, 35, 0.5f, 2.f);
  const double momentum = 0.8, eps = 1e-5;
  std::vector<double> bm(2, 0), bv(2, 0), want(24), rm(2), rv(2);
  for (int64_t i = 0; i < 24; ++i) bm[(i / 4) % 2] += x.item_as_double(i) / 12;
  for (int64_t i = 0; i < 24; ++i) {
    const double d = x.item_as_double(i) - bm[(i / 4) % 2];
    bv[(i / 4) % 2] += d * d / 12;
  }
  for (int64_t i = 0; i < 24; ++i) {
    const int64_t c = (i / 4) % 2;
    want[i] = (x.item_as_double(i) - bm[c]) / std::sqrt(bv[c] + eps) * scale.item_as_double(c) +
              bias.item_as_double(c);
  }
  for (int c = 0; c < 2; ++c) {
    rm[c] = mean.item_as_double(c) * momentum + bm[c] * (1 - momentum);
    rv[c] = var.item_as_double(c) * momentum + bv[c] * (1 - momentum);
  }
  Node n = make_node("BatchNormalization", {"x", "s", "b", "m", "v"}, {"y", "rm", "rv"});
  n.attributes["training_mode"] = Attribute::of_int(1);
  n.attributes["momentum"] = Attribute::of_float(static_cast<float>(momentum));
  auto out = run_node(n, {x, scale, bias, mean, var}, 15);
  expect_close(out[0], x.shape(), want);
  expect_close(out[1], {2}, rm);
  expect_close(out[2], {2}, rv);
  // Opset 9: training is implied by the extra outputs; saved mean/var are the batch stats.
  Node old =
      make_node("BatchNormalization", {"x", "s", "b", "m", "v"}, {"y", "rm", "rv", "sm", "sv"});
  old.attributes["momentum"] = Attribute::of_float(static_cast<float>(momentum));
  out = run_node(old, {x, scale, bias, mean, var}, 9);
  expect_close(out[0], x.shape(), want);
  expect_close(out[1], {2}, rm);
  expect_close(out[3], {2}, bm);
  expect_close(out[4], {2}, bv);
}

TEST(BatchNormTest, Errors) {
  const Tensor x = random_tensor({2, 3, 4}, 36);
  const Tensor p3 = random_tensor({3}, 37, 0.5f, 1.f), p2 = random_tensor({2}, 38);
  Node n = make_node("BatchNormalization", {"x", "s", "b", "m", "v"}, {"y"});
  EXPECT_THROW(run_node(n, {x, p2, p3, p3, p3}, 15), Error);
  EXPECT_THROW(run_node(n, {x, p3, p3, p3, p2}, 15), Error);
  EXPECT_THROW(run_node(n, {random_tensor({3}, 39), p3, p3, p3, p3}, 15), Error);
}

// ---------------------------------------------------------------- LayerNormalization

TEST(LayerNormTest, AllAxesMatchNaiveWithStatOutputs) {
  const Tensor x = random_tensor({2, 3, 4}, 41);
  for (int64_t axis : {0, 1, 2, -1, -2}) {
    SCOPED_TRACE(axis);
    const int64_t a = axis < 0 ? axis + 3 : axis;
    const int64_t rows = dims_product_test(x.shape(), 0, a), D = x.numel() / rows;
    const Shape norm_shape(x.shape().begin() + a, x.shape().end());
    const Tensor w = random_tensor(norm_shape, 42), b = random_tensor(norm_shape, 43);
    std::vector<double> want(static_cast<size_t>(x.numel())), mean(rows), inv(rows);
    for (int64_t r = 0; r < rows; ++r) {
      double m = 0, v = 0;
      for (int64_t d = 0; d < D; ++d) m += x.item_as_double(r * D + d) / D;
      for (int64_t d = 0; d < D; ++d) v += std::pow(x.item_as_double(r * D + d) - m, 2) / D;
      mean[r] = m;
      inv[r] = 1 / std::sqrt(v + 1e-3);
      for (int64_t d = 0; d < D; ++d)
        want[r * D + d] =
            (x.item_as_double(r * D + d) - m) * inv[r] * w.item_as_double(d) + b.item_as_double(d);
    }
    Node n = make_node("LayerNormalization", {"x", "w", "b"}, {"y", "mean", "inv"});
    n.attributes["axis"] = Attribute::of_int(axis);
    n.attributes["epsilon"] = Attribute::of_float(1e-3f);
    auto out = run_node(n, {x, w, b}, 17);
    Shape stat_shape(x.shape().begin(), x.shape().begin() + a);
    stat_shape.resize(3, 1);
    expect_close(out[0], x.shape(), want);
    EXPECT_EQ(out[1].dtype(), DType::Float32);
    expect_close(out[1], stat_shape, mean);
    expect_close(out[2], stat_shape, inv);
  }
}

TEST(LayerNormTest, BroadcastScaleAndNoBias) {
  const Tensor x = random_tensor({4, 2, 3}, 44);
  const Tensor w = Tensor::from_vector<float>({1, 3}, {1, 2, -1});  // broadcasts to [2, 3]
  std::vector<double> want(24);
  for (int64_t r = 0; r < 4; ++r) {
    double m = 0, v = 0;
    for (int d = 0; d < 6; ++d) m += x.item_as_double(r * 6 + d) / 6;
    for (int d = 0; d < 6; ++d) v += std::pow(x.item_as_double(r * 6 + d) - m, 2) / 6;
    for (int d = 0; d < 6; ++d)
      want[r * 6 + d] =
          (x.item_as_double(r * 6 + d) - m) / std::sqrt(v + 1e-5) * w.item_as_double(d % 3);
  }
  Node n = make_node("LayerNormalization", {"x", "w"}, {"y"});
  n.attributes["axis"] = Attribute::of_int(1);
  expect_close(run_node(n, {x, w}, 17)[0], x.shape(), want);
  // Large rows (parallel path) still match.
  const Tensor big = random_tensor({32, 768}, 45);
  const Tensor ones = Tensor::from_vector<float>({768}, std::vector<float>(768, 1.f));
  Tensor y = run_node(make_node("LayerNormalization", {"x", "w"}, {"y"}), {big, ones}, 17)[0];
  for (int64_t r = 0; r < 32; ++r) {
    double m = 0, v = 0;
    for (int64_t d = 0; d < 768; ++d) m += y.item_as_double(r * 768 + d) / 768;
    for (int64_t d = 0; d < 768; ++d) v += std::pow(y.item_as_double(r * 768 + d) - m, 2) / 768;
    EXPECT_NEAR(m, 0, 1e-5);
    EXPECT_NEAR(v, 1, 1e-3);
  }
}

TEST(LayerNormTest, Errors) {
  const Tensor x = random_tensor({2, 3}, 46);
  Node n = make_node("LayerNormalization", {"x", "w"}, {"y"});
  n.attributes["axis"] = Attribute::of_int(2);
  EXPECT_THROW(run_node(n, {x, random_tensor({3}, 47)}, 17), Error);
  n.attributes["axis"] = Attribute::of_int(-1);
  EXPECT_THROW(run_node(n, {x, random_tensor({4}, 47)}, 17), Error);
  EXPECT_THROW(run_node(n, {x, random_tensor({2, 3}, 47)}, 17), Error);
}

// ---------------------------------------------------------------- Instance / Group norm

/// Naive group normalization of X [N, C, S] with per-channel scale/bias vectors.
std::vector<double> naive_group_norm(const Tensor& x, int64_t groups,
                                     const std::vector<double>& scale,
                                     const std::vector<double>& bias, double eps) {
  const int64_t N = x.shape()[0], C = x.shape()[1], S = x.numel() / (N * C), cg = C / groups;
  std::vector<double> y(static_cast<size_t>(x.numel()));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t base = (n * C + g * cg) * S, len = cg * S;
      double m = 0, v = 0;
      for (int64_t i = 0; i < len; ++i) m += x.item_as_double(base + i) / len;
      for (int64_t i = 0; i < len; ++i) v += std::pow(x.item_as_double(base + i) - m, 2) / len;
      for (int64_t i = 0; i < len; ++i) {
        const int64_t c = g * cg + i / S;
        y[base + i] = (x.item_as_double(base + i) - m) / std::sqrt(v + eps) * scale[c] + bias[c];
      }
    }
  return y;
}

std::vector<double> values(const Tensor& t) {
  std::vector<double> v;
  for (int64_t i = 0; i < t.numel(); ++i) v.push_back(t.item_as_double(i));
  return v;
}

TEST(InstanceNormTest, MatchesNaive) {
  const Tensor x = random_tensor({2, 3, 4, 5}, 51);
  const Tensor s = random_tensor({3}, 52), b = random_tensor({3}, 53);
  Node n = make_node("InstanceNormalization", {"x", "s", "b"}, {"y"});
  n.attributes["epsilon"] = Attribute::of_float(1e-2f);
  expect_close(run_node(n, {x, s, b}, 6)[0], x.shape(),
               naive_group_norm(x, 3, values(s), values(b), 1e-2));
  EXPECT_THROW(run_node(n, {x, random_tensor({2}, 54), b}, 6), Error);
}

TEST(GroupNormTest, PerGroupAndPerChannelParameters) {
  const Tensor x = random_tensor({2, 4, 3}, 55);
  Node n = make_node("GroupNormalization", {"x", "s", "b"}, {"y"});
  n.attributes["num_groups"] = Attribute::of_int(2);
  // Opset 18: one scale/bias per group.
  const Tensor sg = Tensor::from_vector<float>({2}, {2, -1}),
               bg = Tensor::from_vector<float>({2}, {0.5, 1});
  expect_close(run_node(n, {x, sg, bg}, 18)[0], x.shape(),
               naive_group_norm(x, 2, {2, 2, -1, -1}, {0.5, 0.5, 1, 1}, 1e-5));
  // Opset 21: one per channel.
  const Tensor sc = random_tensor({4}, 56), bc = random_tensor({4}, 57);
  expect_close(run_node(n, {x, sc, bc}, 21)[0], x.shape(),
               naive_group_norm(x, 2, values(sc), values(bc), 1e-5));
  EXPECT_THROW(run_node(n, {x, random_tensor({3}, 58), bc}, 21), Error);
  n.attributes["num_groups"] = Attribute::of_int(3);
  EXPECT_THROW(run_node(n, {x, sc, bc}, 21), Error);
}

// ---------------------------------------------------------------- LpNorm, MVN, LRN

TEST(LpNormTest, L1AndL2AlongAxis) {
  const Tensor x = Tensor::from_vector<float>({2, 2}, {3, 4, 0, 0});
  Node n = make_node("LpNormalization", {"x"}, {"y"});
  expect_close(run_node(n, {x}, 1)[0], {2, 2}, {0.6, 0.8, 0, 0});  // zero norm gives zeros
  n.attributes["p"] = Attribute::of_int(1);
  n.attributes["axis"] = Attribute::of_int(0);
  expect_close(run_node(n, {x}, 1)[0], {2, 2}, {1, 1, 0, 0});
  n.attributes["p"] = Attribute::of_int(3);
  EXPECT_THROW(run_node(n, {x}, 1), Error);
}

TEST(MvnTest, MatchesFunctionDefinition) {
  const Tensor x = random_tensor({2, 3, 2, 2}, 61);
  for (const std::vector<int64_t>& axes : {std::vector<int64_t>{0, 2, 3}, {1}, {-1, -2}}) {
    SCOPED_TRACE(shape_to_string(axes));
    Node n = make_node("MeanVarianceNormalization", {"x"}, {"y"});
    if (axes != std::vector<int64_t>{0, 2, 3}) n.attributes["axes"] = Attribute::of_ints(axes);
    std::vector<bool> red(4, false);
    for (auto a : axes) red[a < 0 ? a + 4 : a] = true;
    std::vector<double> want(static_cast<size_t>(x.numel()));
    for (int64_t i = 0; i < x.numel(); ++i) {
      auto idx = unravel(i, x.shape());
      double m = 0, m2 = 0;
      int64_t count = 0;
      for (int64_t j = 0; j < x.numel(); ++j) {
        auto jdx = unravel(j, x.shape());
        bool same = true;
        for (int d = 0; d < 4; ++d) same = same && (red[d] || jdx[d] == idx[d]);
        if (!same) continue;
        m += x.item_as_double(j);
        m2 += x.item_as_double(j) * x.item_as_double(j);
        ++count;
      }
      m /= count;
      m2 /= count;
      want[i] = (x.item_as_double(i) - m) / (std::sqrt(m2 - m * m) + 1e-9);
    }
    expect_close(run_node(n, {x}, 13)[0], x.shape(), want, 1e-4);
  }
}

TEST(LrnTest, MatchesNaive) {
  const Tensor x = random_tensor({2, 5, 3}, 62);
  for (int64_t size : {1, 2, 3, 4}) {
    SCOPED_TRACE(size);
    Node n = make_node("LRN", {"x"}, {"y"});
    n.attributes["size"] = Attribute::of_int(size);
    n.attributes["alpha"] = Attribute::of_float(0.5f);
    n.attributes["beta"] = Attribute::of_float(0.6f);
    n.attributes["bias"] = Attribute::of_float(1.5f);
    std::vector<double> want(30);
    for (int64_t i = 0; i < 30; ++i) {
      const int64_t nn = i / 15, c = (i / 3) % 5, s = i % 3;
      double sq = 0;
      for (int64_t k = std::max<int64_t>(0, c - (size - 1) / 2);
           k <= std::min<int64_t>(4, c + (size - 1) - (size - 1) / 2); ++k)
        sq += std::pow(x.item_as_double(nn * 15 + k * 3 + s), 2);
      want[i] = x.item_as_double(i) / std::pow(1.5 + 0.5 / size * sq, 0.6);
    }
    expect_close(run_node(n, {x}, 13)[0], x.shape(), want);
  }
  EXPECT_THROW(run_node(make_node("LRN", {"x"}, {"y"}), {x}, 13), Error);  // size is required
}

// ---------------------------------------------------------------- Einsum

Tensor einsum(const std::string& eq, const std::vector<Tensor>& inputs) {
  std::vector<std::string> names;
  for (size_t i = 0; i < inputs.size(); ++i)
    names.push_back(std::string(1, static_cast<char>('a' + i)));
  Node n = make_node("Einsum", names, {"y"});
  n.attributes["equation"] = Attribute::of_string(eq);
  return run_node(n, inputs, 12)[0];
}

TEST(EinsumTest, CommonEquations) {
  const Tensor a = random_tensor({2, 3}, 71), b = random_tensor({3, 4}, 72);
  std::vector<double> mm(8, 0);
  for (int i = 0; i < 2; ++i)
    for (int k = 0; k < 4; ++k)
      for (int j = 0; j < 3; ++j)
        mm[i * 4 + k] += a.item_as_double(i * 3 + j) * b.item_as_double(j * 4 + k);
  expect_close(einsum("ij,jk->ik", {a, b}), {2, 4}, mm);
  expect_close(einsum("ij,jk", {a, b}), {2, 4}, mm);  // implicit output: i, k
  std::vector<double> mmt(8);
  for (int i = 0; i < 2; ++i)
    for (int k = 0; k < 4; ++k) mmt[k * 2 + i] = mm[i * 4 + k];
  expect_close(einsum("ij, jk -> ki", {a, b}), {4, 2}, mmt);
  // Transpose, row sums, total, trace and diagonal.
  std::vector<double> at(6), rows(2, 0);
  double total = 0;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j) {
      at[j * 2 + i] = a.item_as_double(i * 3 + j);
      rows[i] += a.item_as_double(i * 3 + j);
      total += a.item_as_double(i * 3 + j);
    }
  expect_close(einsum("ij->ji", {a}), {3, 2}, at);
  expect_close(einsum("ba", {a}), {3, 2}, at);  // implicit output sorts letters
  expect_close(einsum("ij->i", {a}), {2}, rows);
  expect_close(einsum("ij->", {a}), {}, {total});
  const Tensor sq = Tensor::from_vector<float>({2, 2}, {1, 2, 3, 4});
  expect_close(einsum("ii", {sq}), {}, {5});
  expect_close(einsum("ii->i", {sq}), {2}, {1, 4});
}

TEST(EinsumTest, EllipsisBroadcastsBatchDims) {
  const Tensor a = random_tensor({2, 1, 2, 3}, 73), b = random_tensor({4, 3, 2}, 74);
  Tensor y = einsum("...ij,...jk->...ik", {a, b});
  ASSERT_EQ(shape_to_string(y.shape()), "[2, 4, 2, 2]");
  for (int p = 0; p < 2; ++p)
    for (int q = 0; q < 4; ++q)
      for (int i = 0; i < 2; ++i)
        for (int k = 0; k < 2; ++k) {
          double s = 0;
          for (int j = 0; j < 3; ++j)
            s += a.item_as_double((p * 2 + i) * 3 + j) * b.item_as_double((q * 3 + j) * 2 + k);
          EXPECT_NEAR(y.item_as_double(((p * 4 + q) * 2 + i) * 2 + k), s, 1e-5);
        }
  const Tensor i64 = Tensor::from_vector<int64_t>({2, 2}, {1, 2, 3, 4});
  expect_close(einsum("...i->...", {i64}), {2}, {3, 7});
}

TEST(EinsumTest, Errors) {
  const Tensor a = random_tensor({2, 3}, 75), b = random_tensor({4, 3}, 76);
  EXPECT_THROW(einsum("ij,jk->ik", {a, b}), Error);  // j sizes disagree
  EXPECT_THROW(einsum("ijk->i", {a}), Error);        // rank mismatch
  EXPECT_THROW(einsum("ij->iz", {a}), Error);        // unknown output label
  EXPECT_THROW(einsum("ij->ii", {a}), Error);        // repeated output label
  EXPECT_THROW(einsum("ij,jk->ik", {a}), Error);     // operand count
  EXPECT_THROW(einsum("i1->i", {a}), Error);         // bad character
  EXPECT_THROW(einsum("......->", {a}), Error);      // two ellipses
}

}  // namespace
}  // namespace dprun
