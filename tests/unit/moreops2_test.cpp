// NonMaxSuppression, GridSample, Unique, RoiAlign, MaxUnpool, Det, windows, DFT/STFT,
// MelWeightMatrix, TfIdfVectorizer, training optimizers and random generators.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "engine/error.h"
#include "op_test_util.h"

namespace dprun {
namespace {

using testing::make_node;
using testing::run_node;

using testing::expect_values;

TEST(MoreOpsNms, SuppressesOverlapsPerClass) {
  // Boxes as [y1, x1, y2, x2]; box 1 overlaps box 0 heavily, box 2 is apart.
  Tensor boxes = Tensor::from_vector<float>({1, 3, 4}, {0, 0, 1, 1, 0, 0.1f, 1, 1.1f, 0, 5, 1, 6});
  Tensor scores = Tensor::from_vector<float>({1, 2, 3}, {0.9f, 0.8f, 0.7f, 0.1f, 0.2f, 0.95f});
  Node n = make_node("NonMaxSuppression", {"b", "s", "m", "iou", "st"}, {"sel"});
  auto out =
      run_node(n,
               {boxes, scores, Tensor::from_vector<int64_t>({1}, {5}),
                Tensor::from_vector<float>({1}, {0.5f}), Tensor::from_vector<float>({1}, {0.15f})},
               11)[0];
  // Class 0: 0 kept, 1 suppressed, 2 kept. Class 1: 2 (0.95), 1 (0.2) then 0 under threshold.
  expect_values(out, {4, 3}, {0, 0, 0, 0, 0, 2, 0, 1, 2, 0, 1, 1});
  // max_output_boxes_per_class limits each class.
  auto one =
      run_node(n,
               {boxes, scores, Tensor::from_vector<int64_t>({1}, {1}),
                Tensor::from_vector<float>({1}, {0.5f}), Tensor::from_vector<float>({1}, {0.f})},
               11)[0];
  expect_values(one, {2, 3}, {0, 0, 0, 0, 1, 2});
  EXPECT_THROW(
      run_node(n,
               {Tensor::from_vector<float>({1, 3, 3}, std::vector<float>(9, 0)), scores,
                Tensor::from_vector<int64_t>({1}, {1}), Tensor::from_vector<float>({1}, {0.5f}),
                Tensor::from_vector<float>({1}, {0.f})},
               11),
      Error);
}

TEST(MoreOpsNms, CenterPointFormat) {
  // [x_center, y_center, w, h]: the two boxes coincide.
  Tensor boxes = Tensor::from_vector<float>({1, 2, 4}, {0.5f, 0.5f, 1, 1, 0.5f, 0.5f, 1, 1});
  Tensor scores = Tensor::from_vector<float>({1, 1, 2}, {0.3f, 0.6f});
  Node n = make_node("NonMaxSuppression", {"b", "s", "m", "iou"}, {"sel"});
  n.attributes["center_point_box"] = Attribute::of_int(1);
  auto out = run_node(
      n, {boxes, scores, Tensor::from_vector<int64_t>({1}, {3}), Tensor::scalar<float>(0.5f)},
      11)[0];
  expect_values(out, {1, 3}, {0, 0, 1});
}

TEST(MoreOpsGridSample, IdentityGridAndPadding) {
  Tensor x = Tensor::from_vector<float>({1, 1, 2, 2}, {1, 2, 3, 4});
  // align_corners=1: normalized -1/1 hit pixel centres exactly.
  Tensor grid = Tensor::from_vector<float>({1, 1, 3, 2}, {-1, -1, 1, 1, 0, 0});
  Node n = make_node("GridSample", {"x", "g"}, {"y"});
  n.attributes["align_corners"] = Attribute::of_int(1);
  expect_values(run_node(n, {x, grid}, 16)[0], {1, 1, 1, 3}, {1, 4, 2.5});
  // Zero padding outside the image at align_corners=0: (x, y) = (-1, -1) is the corner of
  // pixel (0, 0), a quarter of whose bilinear weight is inside.
  Node z = make_node("GridSample", {"x", "g"}, {"y"});
  expect_values(run_node(z, {x, Tensor::from_vector<float>({1, 1, 1, 2}, {-1, -1})}, 16)[0],
                {1, 1, 1, 1}, {0.25});
  z.attributes["padding_mode"] = Attribute::of_string("border");
  expect_values(run_node(z, {x, Tensor::from_vector<float>({1, 1, 1, 2}, {-3, 3})}, 16)[0],
                {1, 1, 1, 1}, {3});
  z.attributes["mode"] = Attribute::of_string("nearest");
  z.attributes["padding_mode"] = Attribute::of_string("zeros");
  expect_values(run_node(z, {x, Tensor::from_vector<float>({1, 1, 1, 2}, {0.6f, -0.6f})}, 16)[0],
                {1, 1, 1, 1}, {2});
  EXPECT_THROW(run_node(z, {x, Tensor::from_vector<float>({1, 1, 1, 3}, {0, 0, 0})}, 16), Error);
}

TEST(MoreOpsUnique, SortedUnsortedAndAxis) {
  Tensor x = Tensor::from_vector<float>({6}, {2, 1, 1, 3, 4, 3});
  auto s = run_node(make_node("Unique", {"x"}, {"y", "i", "inv", "c"}), {x}, 11);
  expect_values(s[0], {4}, {1, 2, 3, 4});
  expect_values(s[1], {4}, {1, 0, 3, 4});
  expect_values(s[2], {6}, {1, 0, 0, 2, 3, 2});
  expect_values(s[3], {4}, {2, 1, 2, 1});
  Node un = make_node("Unique", {"x"}, {"y", "i", "inv", "c"});
  un.attributes["sorted"] = Attribute::of_int(0);
  auto u = run_node(un, {x}, 11);
  expect_values(u[0], {4}, {2, 1, 3, 4});
  expect_values(u[1], {4}, {0, 1, 3, 4});
  expect_values(u[2], {6}, {0, 1, 1, 2, 3, 2});
  expect_values(u[3], {4}, {1, 2, 2, 1});
  Tensor m = Tensor::from_vector<int64_t>({3, 2}, {1, 0, 0, 1, 1, 0});
  Node ax = make_node("Unique", {"x"}, {"y", "i", "inv", "c"});
  ax.attributes["axis"] = Attribute::of_int(-2);
  auto a = run_node(ax, {m}, 11);
  expect_values(a[0], {2, 2}, {0, 1, 1, 0});
  expect_values(a[2], {3}, {1, 0, 1});
  ax.attributes["axis"] = Attribute::of_int(2);
  EXPECT_THROW(run_node(ax, {m}, 11), Error);
}

TEST(MoreOpsRoiAlign, LinearImage) {
  // Pixel value = column index; rows identical.
  std::vector<float> img(16);
  for (int i = 0; i < 16; ++i) img[i] = static_cast<float>(i % 4);
  Tensor x = Tensor::from_vector<float>({1, 1, 4, 4}, img);
  Tensor rois = Tensor::from_vector<float>({1, 4}, {0, 0, 4, 4});
  Node n = make_node("RoiAlign", {"x", "r", "b"}, {"y"});
  n.attributes["output_height"] = Attribute::of_int(2);
  n.attributes["output_width"] = Attribute::of_int(2);
  n.attributes["sampling_ratio"] = Attribute::of_int(1);
  // half_pixel: samples at x = 0.5 and 2.5.
  expect_values(run_node(n, {x, rois, Tensor::from_vector<int64_t>({1}, {0})}, 16)[0], {1, 1, 2, 2},
                {0.5, 2.5, 0.5, 2.5});
  // Opset 10 (no half-pixel offset): samples at x = 1 and 3.
  expect_values(run_node(n, {x, rois, Tensor::from_vector<int64_t>({1}, {0})}, 10)[0], {1, 1, 2, 2},
                {1, 3, 1, 3});
  EXPECT_THROW(run_node(n, {x, rois, Tensor::from_vector<int64_t>({1}, {1})}, 16), Error);
}

TEST(MoreOpsMaxUnpool, ScattersAndOutputShape) {
  Tensor x = Tensor::from_vector<float>({1, 1, 1, 2}, {5, 7});
  Tensor i = Tensor::from_vector<int64_t>({1, 1, 1, 2}, {1, 2});
  Node n = make_node("MaxUnpool", {"x", "i"}, {"y"});
  n.attributes["kernel_shape"] = Attribute::of_ints({1, 2});
  n.attributes["strides"] = Attribute::of_ints({1, 2});
  expect_values(run_node(n, {x, i}, 11)[0], {1, 1, 1, 4}, {0, 5, 7, 0});
  Node s = make_node("MaxUnpool", {"x", "i", "s"}, {"y"});
  s.attributes["kernel_shape"] = Attribute::of_ints({1, 2});
  s.attributes["strides"] = Attribute::of_ints({1, 2});
  expect_values(run_node(s, {x, i, Tensor::from_vector<int64_t>({4}, {1, 1, 1, 5})}, 11)[0],
                {1, 1, 1, 5}, {0, 5, 7, 0, 0});  // same coordinates in the wider row
  EXPECT_THROW(run_node(n, {x, Tensor::from_vector<int64_t>({1, 1, 1, 2}, {1, 9})}, 11), Error);
}

TEST(MoreOpsDet, BatchedAndSingular) {
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

TEST(MoreOpsWindow, HannHammingBlackman) {
  Node h = make_node("HannWindow", {"n"}, {"y"});
  expect_values(run_node(h, {Tensor::scalar<int64_t>(4)}, 17)[0], {4}, {0, 0.5, 1, 0.5});
  h.attributes["periodic"] = Attribute::of_int(0);
  expect_values(run_node(h, {Tensor::scalar<int64_t>(4)}, 17)[0], {4}, {0, 0.75, 0.75, 0});
  const double a0 = 25.0 / 46.0;
  expect_values(
      run_node(make_node("HammingWindow", {"n"}, {"y"}), {Tensor::scalar<int32_t>(2)}, 17)[0], {2},
      {a0 - (1 - a0), a0 + (1 - a0)});
  Node b = make_node("BlackmanWindow", {"n"}, {"y"});
  b.attributes["output_datatype"] = Attribute::of_int(11);
  auto bw = run_node(b, {Tensor::scalar<int64_t>(4)}, 17)[0];
  EXPECT_EQ(bw.dtype(), DType::Float64);
  expect_values(bw, {4}, {0.42 - 0.5 + 0.08, 0.42 - 0.08, 0.42 + 0.5 + 0.08, 0.42 - 0.08}, 1e-12);
  EXPECT_THROW(run_node(h, {Tensor::scalar<int64_t>(-1)}, 17), Error);
}

TEST(MoreOpsDft, ForwardInverseOnesided) {
  Tensor x = Tensor::from_vector<float>({1, 4, 1}, {1, 2, 3, 4});
  Node n = make_node("DFT", {"x"}, {"y"});
  auto y = run_node(n, {x}, 17)[0];
  expect_values(y, {1, 4, 2}, {10, 0, -2, 2, -2, 0, -2, -2}, 1e-5);
  Node inv = make_node("DFT", {"x"}, {"y"});
  inv.attributes["inverse"] = Attribute::of_int(1);
  expect_values(run_node(inv, {y}, 17)[0], {1, 4, 2}, {1, 0, 2, 0, 3, 0, 4, 0}, 1e-5);
  Node one = make_node("DFT", {"x", "len"}, {"y"});
  one.attributes["onesided"] = Attribute::of_int(1);
  // dft_length 2 truncates to [1, 2]: X = [3, -1].
  expect_values(run_node(one, {x, Tensor::scalar<int64_t>(2)}, 17)[0], {1, 2, 2}, {3, 0, -1, 0},
                1e-5);
  // Opset 20 takes the axis as an input.
  Node n20 = make_node("DFT", {"x", "", "axis"}, {"y"});
  expect_values(run_node(n20, {x, Tensor::scalar<int64_t>(1)}, 20)[0], {1, 4, 2},
                {10, 0, -2, 2, -2, 0, -2, -2}, 1e-5);
  Node bad = make_node("DFT", {"x"}, {"y"});
  bad.attributes["axis"] = Attribute::of_int(2);
  EXPECT_THROW(run_node(bad, {x}, 17), Error);
}

TEST(MoreOpsDft, StftMatchesFramewiseDft) {
  std::vector<float> sig = {1, 2, 3, 4, 0, 1, 0, -1};
  Node n = make_node("STFT", {"s", "step", "w"}, {"y"});
  n.attributes["onesided"] = Attribute::of_int(0);
  auto y = run_node(n,
                    {Tensor::from_vector<float>({1, 8, 1}, sig), Tensor::scalar<int64_t>(4),
                     Tensor::from_vector<float>({4}, {1, 1, 1, 1})},
                    17)[0];
  // Frame 0 = [1,2,3,4]; frame 1 = [0,1,0,-1] -> [0, -2i, 0, 2i].
  expect_values(y, {1, 2, 4, 2}, {10, 0, -2, 2, -2, 0, -2, -2, 0, 0, 0, -2, 0, 0, 0, 2}, 1e-5);
  Node w = make_node("STFT", {"s", "step", "", "len"}, {"y"});
  auto half = run_node(w,
                       {Tensor::from_vector<float>({1, 8, 1}, sig), Tensor::scalar<int64_t>(2),
                        Tensor::scalar<int64_t>(4)},
                       17)[0];
  EXPECT_EQ(shape_to_string(half.shape()), shape_to_string(Shape{1, 3, 3, 2}));
  EXPECT_THROW(run_node(w,
                        {Tensor::from_vector<float>({1, 8, 1}, sig), Tensor::scalar<int64_t>(2),
                         Tensor::scalar<int64_t>(9)},
                        17),
               Error);
}

TEST(MoreOpsDft, MelWeightMatrixTriangles) {
  Node n = make_node("MelWeightMatrix", {"m", "d", "r", "lo", "hi"}, {"y"});
  auto y = run_node(
      n,
      {Tensor::scalar<int64_t>(4), Tensor::scalar<int64_t>(32), Tensor::scalar<int64_t>(16000),
       Tensor::scalar<float>(0.f), Tensor::scalar<float>(8000.f)},
      17)[0];
  ASSERT_EQ(shape_to_string(y.shape()), shape_to_string(Shape{17, 4}));
  for (int64_t m = 0; m < 4; ++m) {
    double peak = 0;
    for (int64_t k = 0; k < 17; ++k) {
      const double v = y.item_as_double(k * 4 + m);
      EXPECT_GE(v, 0);
      EXPECT_LE(v, 1);
      peak = std::max(peak, v);
    }
    EXPECT_DOUBLE_EQ(peak, 1.0) << "filter " << m;
  }
}

TEST(MoreOpsTfIdf, CountsUniAndBigramsWithSkips) {
  Node n = make_node("TfIdfVectorizer", {"x"}, {"y"});
  n.attributes["min_gram_length"] = Attribute::of_int(1);
  n.attributes["max_gram_length"] = Attribute::of_int(2);
  n.attributes["max_skip_count"] = Attribute::of_int(1);
  n.attributes["mode"] = Attribute::of_string("TF");
  n.attributes["ngram_counts"] = Attribute::of_ints({0, 2});
  n.attributes["ngram_indexes"] = Attribute::of_ints({0, 1, 2});
  n.attributes["pool_int64s"] = Attribute::of_ints({7, 8, 7, 9});  // unigrams 7, 8; bigram (7, 9)
  Tensor x = Tensor::from_vector<int32_t>({2, 3}, {7, 8, 9, 7, 9, 7});
  // Row 0: 7 once, 8 once, (7, 9) with one skip. Row 1: 7 twice, (7, 9) adjacent.
  expect_values(run_node(n, {x}, 9)[0], {2, 3}, {1, 1, 1, 2, 0, 1});
  n.attributes["mode"] = Attribute::of_string("TFIDF");
  n.attributes["weights"] = [] {
    Attribute a;
    a.kind = Attribute::Kind::Floats;
    a.floats = {0.5f, 2.f, 3.f};
    return a;
  }();
  expect_values(run_node(n, {x}, 9)[0], {2, 3}, {0.5, 2, 3, 1, 0, 3});
  n.attributes["mode"] = Attribute::of_string("IDF");
  expect_values(run_node(n, {x}, 9)[0], {2, 3}, {0.5, 2, 3, 0.5, 0, 3});
  EXPECT_THROW(run_node(n, {Tensor::from_vector<float>({2}, {1, 2})}, 9), Error);
}

TEST(MoreOpsOptimizers, AdagradMomentumAdam) {
  const std::string dom = "ai.onnx.preview.training";
  Tensor R = Tensor::scalar<float>(0.1f), T = Tensor::scalar<int64_t>(1);
  Tensor X = Tensor::from_vector<float>({1}, {1.f}), G = Tensor::from_vector<float>({1}, {2.f});
  Tensor H = Tensor::from_vector<float>({1}, {3.f});
  Node a = make_node("Adagrad", {"R", "T", "X", "G", "H"}, {"X2", "H2"});
  a.domain = dom;
  a.attributes["decay_factor"] = Attribute::of_float(1.f);
  // r = 0.1 / 2; H' = 3 + 4 = 7; X' = 1 - 0.05 * 2 / sqrt(7).
  auto ao = run_node(a, {R, T, X, G, H}, 1, dom);
  expect_values(ao[0], {1}, {1 - 0.05 * 2 / (std::sqrt(7.0) + 1e-6)});
  expect_values(ao[1], {1}, {7});
  Node m = make_node("Momentum", {"R", "T", "X", "G", "V"}, {"X2", "V2"});
  m.domain = dom;
  m.attributes["alpha"] = Attribute::of_float(0.5f);
  m.attributes["beta"] = Attribute::of_float(0.25f);
  m.attributes["norm_coefficient"] = Attribute::of_float(0.f);
  m.attributes["mode"] = Attribute::of_string("nesterov");
  // V' = 0.5 * 3 + 0.25 * 2 = 2; nesterov X' = 1 - 0.1 * (2 + 0.5 * 2) = 0.7.
  auto mo = run_node(m, {R, T, X, G, H}, 1, dom);
  expect_values(mo[0], {1}, {0.7});
  expect_values(mo[1], {1}, {2});
  Node ad = make_node("Adam", {"R", "T", "X", "G", "V", "H"}, {"X2", "V2", "H2"});
  ad.domain = dom;
  ad.attributes["alpha"] = Attribute::of_float(0.5f);
  ad.attributes["beta"] = Attribute::of_float(0.5f);
  Tensor V = Tensor::from_vector<float>({1}, {1.f});
  // V' = 0.5 + 1 = 1.5; H' = 1.5 + 2 = 3.5; lr = 0.1 * sqrt(0.5) / 0.5.
  auto o = run_node(ad, {R, T, X, G, V, H}, 1, dom);
  expect_values(o[0], {1}, {1 - 0.1 * std::sqrt(0.5) / 0.5 * 1.5 / (std::sqrt(3.5) + 1e-6)});
  expect_values(o[1], {1}, {1.5});
  expect_values(o[2], {1}, {3.5});
  EXPECT_THROW(run_node(ad, {R, T, X, G, V}, 1, dom), Error);
}

TEST(MoreOpsRandom, UniformNormalShapesRangesAndSeed) {
  Node u = make_node("RandomUniform", {}, {"y"});
  u.attributes["shape"] = Attribute::of_ints({100, 50});
  u.attributes["low"] = Attribute::of_float(-2.f);
  u.attributes["high"] = Attribute::of_float(3.f);
  u.attributes["seed"] = Attribute::of_float(7.f);
  auto y = run_node(u, {}, 1)[0];
  ASSERT_EQ(y.dtype(), DType::Float32);
  ASSERT_EQ(shape_to_string(y.shape()), shape_to_string(Shape{100, 50}));
  double sum = 0;
  for (int64_t i = 0; i < y.numel(); ++i) {
    EXPECT_GE(y.item_as_double(i), -2);
    EXPECT_LT(y.item_as_double(i), 3);
    sum += y.item_as_double(i);
  }
  EXPECT_NEAR(sum / y.numel(), 0.5, 0.1);
  // The same seed draws the same values.
  auto again = run_node(u, {}, 1)[0];
  for (int64_t i = 0; i < y.numel(); ++i) ASSERT_EQ(y.item_as_double(i), again.item_as_double(i));

  Node nl = make_node("RandomNormalLike", {"x"}, {"y"});
  nl.attributes["mean"] = Attribute::of_float(1.f);
  nl.attributes["scale"] = Attribute::of_float(2.f);
  auto z = run_node(nl, {Tensor::zeros({4000}, DType::Float64)}, 1)[0];
  ASSERT_EQ(z.dtype(), DType::Float64);
  double m = 0, v = 0;
  for (int64_t i = 0; i < z.numel(); ++i) m += z.item_as_double(i);
  m /= z.numel();
  for (int64_t i = 0; i < z.numel(); ++i) v += std::pow(z.item_as_double(i) - m, 2);
  v /= z.numel();
  EXPECT_NEAR(m, 1.0, 0.15);
  EXPECT_NEAR(std::sqrt(v), 2.0, 0.15);

  Node bad = make_node("RandomUniform", {}, {"y"});
  bad.attributes["shape"] = Attribute::of_ints({2});
  bad.attributes["dtype"] = Attribute::of_int(7);  // int64 is not allowed
  EXPECT_THROW(run_node(bad, {}, 1), Error);
}

TEST(MoreOpsRandom, Bernoulli) {
  std::vector<float> p(2000);
  for (size_t i = 0; i < p.size(); ++i) p[i] = i < 500 ? 0.f : i < 1000 ? 1.f : 0.3f;
  Node n = make_node("Bernoulli", {"p"}, {"y"});
  n.attributes["dtype"] = Attribute::of_int(9);  // bool
  n.attributes["seed"] = Attribute::of_float(1.f);
  auto y = run_node(n, {Tensor::from_vector<float>({2000}, p)}, 15)[0];
  ASSERT_EQ(y.dtype(), DType::Bool);
  double ones = 0;
  for (int64_t i = 0; i < 2000; ++i) {
    const double v = y.item_as_double(i);
    if (i < 500) {
      ASSERT_EQ(v, 0);
    } else if (i < 1000) {
      ASSERT_EQ(v, 1);
    } else {
      ones += v;
    }
  }
  EXPECT_NEAR(ones / 1000, 0.3, 0.06);
  EXPECT_THROW(run_node(n, {Tensor::from_vector<float>({1}, {1.5f})}, 15), Error);
}

}  // namespace
}  // namespace dprun
