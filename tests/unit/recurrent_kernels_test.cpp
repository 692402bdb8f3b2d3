// The reference RNN, GRU and LSTM kernels (ops/recurrent/rnn.cpp): forward passes against naive
// recurrences written here (bidirectional, sequence_lens) and one-step values worked out by hand
// (GRU linear_before_reset and layout, LSTM peepholes and input_forget, activations and clip),
// and the attributes and shapes they refuse.
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

Attribute strings_attr(std::vector<std::string> v) {
  Attribute a;
  a.kind = Attribute::Kind::Strings;
  a.strings = std::move(v);
  return a;
}

std::vector<float> rand_vec(size_t n, std::mt19937& rng, float scale = 0.5f) {
  std::uniform_real_distribution<float> d(-scale, scale);
  std::vector<float> v(n);
  for (auto& e : v) e = d(rng);
  return v;
}

double sigm(double v) {
  return 1 / (1 + std::exp(-v));
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

TEST(RecurrentKernels, SimpleRnnForwardMatchesNaive) {
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

TEST(RecurrentKernels, LstmBidirectionalWithSequenceLens) {
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

TEST(RecurrentKernels, GruLinearBeforeResetAndLayout) {
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

TEST(RecurrentKernels, ActivationsAndErrors) {
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

TEST(RecurrentKernels, LstmPeepholesAndInputForget) {
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

}  // namespace
}  // namespace dprun
