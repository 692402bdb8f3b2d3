// Losses, recurrent networks and quantization kernels: hand-computed values and naive
// references written here.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "engine/error.h"
#include "op_test_util.h"

namespace dprun {
namespace {

using testing::make_node;
using testing::run_node;

using testing::expect_values;

Attribute strings_attr(std::vector<std::string> v) {
  Attribute a;
  a.kind = Attribute::Kind::Strings;
  a.strings = std::move(v);
  return a;
}

// ---- NegativeLogLikelihoodLoss / SoftmaxCrossEntropyLoss ----

TEST(MoreOpsLoss, NllReductions) {
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

TEST(MoreOpsLoss, NllWeightsIgnoreIndexAndSpatialDims) {
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

TEST(MoreOpsLoss, NllErrors) {
  Tensor x = Tensor::from_vector<float>({2, 3}, {0, 0, 0, 0, 0, 0});
  Node n = make_node("NegativeLogLikelihoodLoss", {"x", "t"}, {"y"});
  EXPECT_THROW(run_node(n, {x, Tensor::from_vector<int64_t>({2}, {0, 3})}, 13), Error);
  EXPECT_THROW(run_node(n, {x, Tensor::from_vector<int64_t>({3}, {0, 1, 2})}, 13), Error);
  n.attributes["reduction"] = Attribute::of_string("avg");
  EXPECT_THROW(run_node(n, {x, Tensor::from_vector<int64_t>({2}, {0, 1})}, 13), Error);
}

TEST(MoreOpsLoss, SoftmaxCrossEntropyMatchesNaive) {
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

// ---- RNN / GRU / LSTM ----

struct RnnCase {
  int64_t seq = 3, batch = 2, in = 2, hidden = 3;
  std::vector<float> x, w, r, b;
};

std::vector<float> rand_vec(size_t n, std::mt19937& rng, float scale = 0.5f) {
  std::uniform_real_distribution<float> d(-scale, scale);
  std::vector<float> v(n);
  for (auto& e : v) e = d(rng);
  return v;
}

double sigm(double v) {
  return 1 / (1 + std::exp(-v));
}

TEST(MoreOpsRnn, SimpleRnnForwardMatchesNaive) {
  std::mt19937 rng(1);
  const int64_t S = 3, B = 2, I = 2, H = 3;
  auto x = rand_vec(S * B * I, rng), w = rand_vec(H * I, rng), r = rand_vec(H * H, rng),
       b = rand_vec(2 * H, rng);
  Node n = make_node("RNN", {"X", "W", "R", "B"}, {"Y", "Y_h"});
  n.attributes["hidden_size"] = Attribute::of_int(H);
  auto out = run_node(
      n,
      {Tensor::from_vector<float>({S, B, I}, x), Tensor::from_vector<float>({1, H, I}, w),
       Tensor::from_vector<float>({1, H, H}, r), Tensor::from_vector<float>({1, 2 * H}, b)},
      14);
  std::vector<double> h(B * H, 0), y;
  for (int64_t t = 0; t < S; ++t) {
    std::vector<double> hn(B * H);
    for (int64_t bb = 0; bb < B; ++bb)
      for (int64_t j = 0; j < H; ++j) {
        double s = b[j] + b[H + j];
        for (int64_t k = 0; k < I; ++k) s += x[(t * B + bb) * I + k] * w[j * I + k];
        for (int64_t k = 0; k < H; ++k) s += h[bb * H + k] * r[j * H + k];
        hn[bb * H + j] = std::tanh(s);
      }
    h = hn;
    y.insert(y.end(), h.begin(), h.end());
  }
  expect_values(out[0], {S, 1, B, H}, y);
  expect_values(out[1], {1, B, H}, h);
}

/// Naive LSTM for one direction (no peepholes), layout 0, gates i o f c.
void naive_lstm(int64_t S, int64_t B, int64_t I, int64_t H, const std::vector<float>& x,
                const std::vector<float>& w, const std::vector<float>& r,
                const std::vector<float>& b, const std::vector<int32_t>& lens, bool reverse,
                std::vector<double>& y, std::vector<double>& h, std::vector<double>& c) {
  h.assign(B * H, 0);
  c.assign(B * H, 0);
  y.assign(S * B * H, 0);
  for (int64_t bb = 0; bb < B; ++bb)
    for (int64_t step = 0; step < lens[bb]; ++step) {
      const int64_t t = reverse ? lens[bb] - 1 - step : step;
      std::vector<double> g(4 * H);
      for (int64_t j = 0; j < 4 * H; ++j) {
        double s = b[j] + b[4 * H + j];
        for (int64_t k = 0; k < I; ++k) s += x[(t * B + bb) * I + k] * w[j * I + k];
        for (int64_t k = 0; k < H; ++k) s += h[bb * H + k] * r[j * H + k];
        g[j] = s;
      }
      for (int64_t j = 0; j < H; ++j) {
        double i_ = sigm(g[j]), o_ = sigm(g[H + j]), f_ = sigm(g[2 * H + j]),
               c_ = std::tanh(g[3 * H + j]);
        c[bb * H + j] = f_ * c[bb * H + j] + i_ * c_;
        h[bb * H + j] = o_ * std::tanh(c[bb * H + j]);
        y[(t * B + bb) * H + j] = h[bb * H + j];
      }
    }
}

TEST(MoreOpsRnn, LstmBidirectionalWithSequenceLens) {
  std::mt19937 rng(2);
  const int64_t S = 4, B = 2, I = 3, H = 2;
  auto x = rand_vec(S * B * I, rng);
  auto w = rand_vec(2 * 4 * H * I, rng), r = rand_vec(2 * 4 * H * H, rng),
       b = rand_vec(2 * 8 * H, rng);
  std::vector<int32_t> lens = {4, 2};
  Node n = make_node("LSTM", {"X", "W", "R", "B", "L"}, {"Y", "Y_h", "Y_c"});
  n.attributes["hidden_size"] = Attribute::of_int(H);
  n.attributes["direction"] = Attribute::of_string("bidirectional");
  auto out = run_node(
      n,
      {Tensor::from_vector<float>({S, B, I}, x), Tensor::from_vector<float>({2, 4 * H, I}, w),
       Tensor::from_vector<float>({2, 4 * H, H}, r), Tensor::from_vector<float>({2, 8 * H}, b),
       Tensor::from_vector<int32_t>({B}, lens)},
      14);
  ASSERT_EQ(shape_to_string(out[0].shape()), shape_to_string(Shape{S, 2, B, H}));
  for (int d = 0; d < 2; ++d) {
    std::vector<float> wd(w.begin() + d * 4 * H * I, w.begin() + (d + 1) * 4 * H * I);
    std::vector<float> rd(r.begin() + d * 4 * H * H, r.begin() + (d + 1) * 4 * H * H);
    std::vector<float> bd(b.begin() + d * 8 * H, b.begin() + (d + 1) * 8 * H);
    std::vector<double> y, h, c;
    naive_lstm(S, B, I, H, x, wd, rd, bd, lens, d == 1, y, h, c);
    for (int64_t t = 0; t < S; ++t)
      for (int64_t bb = 0; bb < B; ++bb)
        for (int64_t j = 0; j < H; ++j)
          EXPECT_NEAR(out[0].item_as_double(((t * 2 + d) * B + bb) * H + j),
                      y[(t * B + bb) * H + j], 1e-5);
    for (int64_t i = 0; i < B * H; ++i) {
      EXPECT_NEAR(out[1].item_as_double(d * B * H + i), h[i], 1e-5);
      EXPECT_NEAR(out[2].item_as_double(d * B * H + i), c[i], 1e-5);
    }
  }
}

TEST(MoreOpsRnn, GruLinearBeforeResetAndLayout) {
  // H = 1, I = 1, one step: hand-computed.
  // z = sig(wx_z + r_z h0), r = sig(wx_r + r_r h0),
  // lbr=1: hc = tanh(wx_h + r * (r_h h0 + rb_h)); lbr=0: tanh(wx_h + r_h (r * h0) + rb_h).
  const double x = 0.5, wz = 0.3, wr = -0.2, wh = 0.7, rz = 0.1, rr = 0.4, rh = -0.6, h0 = 0.8,
               rbh = 0.25;
  Tensor X = Tensor::from_vector<float>({1, 1, 1}, {float(x)});
  Tensor W = Tensor::from_vector<float>({1, 3, 1}, {float(wz), float(wr), float(wh)});
  Tensor R = Tensor::from_vector<float>({1, 3, 1}, {float(rz), float(rr), float(rh)});
  Tensor Bt = Tensor::from_vector<float>({1, 6}, {0, 0, 0, 0, 0, float(rbh)});
  Tensor H0 = Tensor::from_vector<float>({1, 1, 1}, {float(h0)});
  const double z = sigm(wz * x + rz * h0), r = sigm(wr * x + rr * h0);
  for (int lbr = 0; lbr < 2; ++lbr) {
    Node n = make_node("GRU", {"X", "W", "R", "B", "", "H0"}, {"Y", "Y_h"});
    n.attributes["hidden_size"] = Attribute::of_int(1);
    n.attributes["linear_before_reset"] = Attribute::of_int(lbr);
    n.attributes["layout"] = Attribute::of_int(1);
    auto out = run_node(n, {X, W, R, Bt, H0}, 14);
    const double hc =
        lbr ? std::tanh(wh * x + r * (rh * h0 + rbh)) : std::tanh(wh * x + rh * (r * h0) + rbh);
    const double h = (1 - z) * hc + z * h0;
    expect_values(out[0], {1, 1, 1, 1}, {h});
    expect_values(out[1], {1, 1, 1}, {h});
  }
}

TEST(MoreOpsRnn, ActivationsAndErrors) {
  // RNN with Relu activation and clip.
  Tensor X = Tensor::from_vector<float>({1, 1, 1}, {2.f});
  Tensor W = Tensor::from_vector<float>({1, 1, 1}, {3.f});
  Tensor R = Tensor::from_vector<float>({1, 1, 1}, {0.f});
  Node n = make_node("RNN", {"X", "W", "R"}, {"", "Y_h"});
  n.attributes["hidden_size"] = Attribute::of_int(1);
  n.attributes["activations"] = strings_attr({"Relu"});
  n.attributes["clip"] = Attribute::of_float(4.f);
  expect_values(run_node(n, {X, W, R}, 14)[0], {1, 1, 1}, {4.0});
  n.attributes["activations"] = strings_attr({"Bogus"});
  EXPECT_THROW(run_node(n, {X, W, R}, 14), Error);
  Node bad = make_node("RNN", {"X", "W", "R"}, {"", "Y_h"});
  bad.attributes["hidden_size"] = Attribute::of_int(2);
  EXPECT_THROW(run_node(bad, {X, W, R}, 14), Error);
}

TEST(MoreOpsRnn, LstmPeepholesAndInputForget) {
  // H = 1, I = 1, one step with peepholes P = [pi, po, pf] and initial c0.
  const double x = 0.4, h0 = 0.2, c0 = -0.5, pi = 0.3, po = -0.2, pf = 0.6;
  const std::vector<float> w = {0.1f, 0.2f, 0.3f, 0.4f}, r = {0.5f, -0.1f, 0.2f, -0.3f};
  Tensor X = Tensor::from_vector<float>({1, 1, 1}, {float(x)});
  Tensor W = Tensor::from_vector<float>({1, 4, 1}, w);
  Tensor R = Tensor::from_vector<float>({1, 4, 1}, r);
  Tensor H0 = Tensor::from_vector<float>({1, 1, 1}, {float(h0)});
  Tensor C0 = Tensor::from_vector<float>({1, 1, 1}, {float(c0)});
  Tensor P = Tensor::from_vector<float>({1, 3}, {float(pi), float(po), float(pf)});
  for (int forget = 0; forget < 2; ++forget) {
    Node n = make_node("LSTM", {"X", "W", "R", "", "", "H0", "C0", "P"}, {"", "Y_h", "Y_c"});
    n.attributes["hidden_size"] = Attribute::of_int(1);
    n.attributes["input_forget"] = Attribute::of_int(forget);
    auto out = run_node(n, {X, W, R, H0, C0, P}, 14);
    const double i = sigm(w[0] * x + r[0] * h0 + pi * c0);
    const double f = forget ? 1 - i : sigm(w[2] * x + r[2] * h0 + pf * c0);
    const double g = std::tanh(w[3] * x + r[3] * h0);
    const double c = f * c0 + i * g;
    const double o = sigm(w[1] * x + r[1] * h0 + po * c);
    expect_values(out[0], {1, 1, 1}, {o * std::tanh(c)});
    expect_values(out[1], {1, 1, 1}, {c});
  }
}

// ---- Quantization ----

TEST(MoreOpsQuant, QuantizeDequantizePerTensorAndAxis) {
  Tensor x = Tensor::from_vector<float>({4}, {0.f, 2.5f, 3.5f, -1000.f});
  Node q = make_node("QuantizeLinear", {"x", "s", "z"}, {"y"});
  // Round half to even: 2.5/1 -> 2, 3.5 -> 4; saturation at 0.
  auto y = run_node(q, {x, Tensor::scalar<float>(1.f), Tensor::scalar<uint8_t>(10)}, 13)[0];
  EXPECT_EQ(y.dtype(), DType::UInt8);
  expect_values(y, {4}, {10, 12, 14, 0});
  auto y8 = run_node(q, {x, Tensor::scalar<float>(0.5f), Tensor::scalar<int8_t>(-1)}, 13)[0];
  EXPECT_EQ(y8.dtype(), DType::Int8);
  expect_values(y8, {4}, {-1, 4, 6, -128});
  // Per-axis along axis 1 of [2, 2].
  Tensor x2 = Tensor::from_vector<float>({2, 2}, {1.f, 2.f, 3.f, 4.f});
  auto ya = run_node(q,
                     {x2, Tensor::from_vector<float>({2}, {1.f, 2.f}),
                      Tensor::from_vector<uint8_t>({2}, {0, 100})},
                     13)[0];
  expect_values(ya, {2, 2}, {1, 101, 3, 102});
  Node dq = make_node("DequantizeLinear", {"x", "s", "z"}, {"y"});
  auto back = run_node(dq,
                       {ya, Tensor::from_vector<float>({2}, {1.f, 2.f}),
                        Tensor::from_vector<uint8_t>({2}, {0, 100})},
                       13)[0];
  expect_values(back, {2, 2}, {1, 2, 3, 4});
  // Mismatched per-axis length fails.
  EXPECT_THROW(run_node(q,
                        {x2, Tensor::from_vector<float>({3}, {1, 1, 1}),
                         Tensor::from_vector<uint8_t>({3}, {0, 0, 0})},
                        13),
               Error);
}

TEST(MoreOpsQuant, DynamicQuantizeLinear) {
  Tensor x = Tensor::from_vector<float>({3}, {-1.f, 0.f, 2.f});
  auto out = run_node(make_node("DynamicQuantizeLinear", {"x"}, {"y", "s", "z"}), {x}, 11);
  const float scale = 3.f / 255.f;
  expect_values(out[1], {}, {scale}, 1e-7);
  expect_values(out[2], {}, {85});  // round(1 / scale) = 85
  expect_values(out[0], {3}, {0, 85, 255});
}

TEST(MoreOpsQuant, QLinearMatMulMatchesFloatReference) {
  Tensor a = Tensor::from_vector<uint8_t>({2, 2}, {10, 20, 30, 40});
  Tensor b = Tensor::from_vector<uint8_t>({2, 1}, {5, 7});
  Node n = make_node("QLinearMatMul", {"a", "as", "az", "b", "bs", "bz", "ys", "yz"}, {"y"});
  auto y = run_node(
      n,
      {a, Tensor::scalar<float>(0.1f), Tensor::scalar<uint8_t>(10), b, Tensor::scalar<float>(0.2f),
       Tensor::scalar<uint8_t>(5), Tensor::scalar<float>(0.05f), Tensor::scalar<uint8_t>(3)},
      10)[0];
  // (a - 10) @ (b - 5) = [[0*0 + 10*2], [20*0 + 30*2]] = [20, 60]; * 0.1*0.2/0.05 = 0.4.
  expect_values(y, {2, 1}, {3 + 8, 3 + 24});
}

TEST(MoreOpsQuant, QLinearConvPointwise) {
  Tensor x = Tensor::from_vector<uint8_t>({1, 1, 2, 2}, {0, 10, 20, 30});
  Tensor w = Tensor::from_vector<int8_t>({2, 1, 1, 1}, {2, -1});
  Node n = make_node("QLinearConv", {"x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "B"}, {"y"});
  auto y = run_node(n,
                    {x, Tensor::scalar<float>(1.f), Tensor::scalar<uint8_t>(0), w,
                     Tensor::from_vector<float>({2}, {1.f, 1.f}),
                     Tensor::from_vector<int8_t>({2}, {0, 0}), Tensor::scalar<float>(2.f),
                     Tensor::scalar<uint8_t>(100), Tensor::from_vector<int32_t>({2}, {4, 0})},
                    10)[0];
  // Channel 0: (2x + 4) / 2 + 100; channel 1: -x / 2 + 100 (half to even).
  expect_values(y, {1, 2, 2, 2}, {102, 112, 122, 132, 100, 95, 90, 85});
}

}  // namespace
}  // namespace dprun
