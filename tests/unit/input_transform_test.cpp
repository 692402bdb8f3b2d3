// The training transforms (engine/training/input_transform.h) against torchvision: the
// deterministic ones at given parameters on the references that
// tests/data/transforms/make_references.py wrote (bit for bit, the resize within 1e-6), the
// random draws by their statistics (within 4 standard deviations), and the options' messages.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <map>
#include <string>

#include "engine/training/augment_draws.h"
#include "engine/training/image_ops.h"
#include "engine/training/input_transform.h"
#include "engine/training/sample_random.h"
#include "engine/training/sample_transform.h"
#include "error_test_util.h"
#include "loader/npy.h"

namespace dprun::testing {
namespace {

std::string fixture(const std::string& name) {
  const char* root = std::getenv("DPRUN_SOURCE_DIR");
  return std::string(root ? root : DPRUN_SOURCE_DIR_DEFAULT) + "/tests/data/transforms/" + name;
}

const std::vector<float> kMean = {0.4914f, 0.4822f, 0.4465f}, kStd = {0.247f, 0.243f, 0.261f};
const Shape kStored = {9, 11, 3};  // each fixture image, HWC

// Image `k` of image.npy as float CHW (layout and ToTensor's division).
Image stored_image(int64_t k) {
  static const Tensor images = read_npy(fixture("image.npy"));
  const auto bytes = static_cast<size_t>(shape_numel(kStored));
  return image_from_row(images.data<uint8_t>() + static_cast<size_t>(k) * bytes, DType::UInt8,
                        kStored, true);
}

// Expects `got` to equal image `k` of the reference within `tolerance` (0: bit for bit).
void expect_reference(const Image& got, const std::string& name, int64_t k, float tolerance) {
  const Tensor want = read_npy(fixture(name));
  ASSERT_EQ(want.rank(), 4) << name;
  ASSERT_EQ((Shape{got.channels, got.height, got.width}),
            (Shape{want.dim(1), want.dim(2), want.dim(3)}))
      << name;
  const size_t n = got.data.size();
  const float* w = want.data<float>() + static_cast<size_t>(k) * n;
  for (size_t i = 0; i < n; ++i) {
    if (tolerance == 0)
      ASSERT_EQ(got.data[i], w[i]) << name << " image " << k << " element " << i;
    else
      ASSERT_NEAR(got.data[i], w[i], tolerance) << name << " image " << k << " element " << i;
  }
}

TEST(InputTransform, LayoutAndNormalizeAreToTensorAndNormalizeBitForBit) {
  for (int64_t k = 0; k < 2; ++k) {
    Image image = stored_image(k);
    normalize(image, kMean, kStd);
    expect_reference(image, "normalized.npy", k, 0);
  }
}

TEST(InputTransform, FlipAndPaddedCropAreTorchvisionsBitForBit) {
  for (int64_t k = 0; k < 2; ++k) {
    Image image = stored_image(k);
    flip_horizontally(image);
    expect_reference(image, "flipped.npy", k, 0);
    for (auto [top, left] : {std::pair{0, 0}, {4, 4}, {1, 3}, {3, 0}})
      expect_reference(crop(stored_image(k), {top - 2, left - 2, 9, 11}),
                       "crop_" + std::to_string(top) + "_" + std::to_string(left) + ".npy", k, 0);
  }
}

TEST(InputTransform, ResizedCropIsTorchvisionsAntialiasedBilinearWithin1e6) {
  const std::vector<std::array<int64_t, 5>> cases = {
      {1, 2, 6, 7, 5}, {0, 0, 9, 11, 4}, {2, 1, 5, 4, 16}, {0, 3, 9, 8, 9}};
  for (int64_t k = 0; k < 2; ++k)
    for (const auto& [top, left, h, w, s] : cases) {
      const Image got = resize_bilinear(crop(stored_image(k), {top, left, h, w}), s, s);
      expect_reference(got,
                       "resized_" + std::to_string(top) + "_" + std::to_string(left) + "_" +
                           std::to_string(h) + "_" + std::to_string(w) + "_" + std::to_string(s) +
                           ".npy",
                       k, 1e-6f);
    }
}

TEST(InputTransform, ValidationSamplesGetTheEvaluationResizeAndCentreCrop) {
  const Tensor images = read_npy(fixture("image.npy"));
  for (int64_t s : {7, 4}) {
    InputTransform t;
    parse_layout("x", "nhwc", t);
    parse_augment("x", "hflip,resized-crop:" + std::to_string(s) + ",cutout:2", t);
    ASSERT_EQ(transformed_sample_shape("x", t, kStored, DType::UInt8), (Shape{3, s, s}));
    for (int64_t k = 0; k < 2; ++k) {
      Image got(3, s, s);
      transform_sample(t, images.data<uint8_t>() + k * 297, DType::UInt8, kStored,
                       {.seed = 5, .epoch = 1, .index = k, .evaluation = true}, got.data.data());
      expect_reference(got, "evaluation_" + std::to_string(s) + ".npy", k, 1e-6f);
    }
  }
}

// A whole sample: the transform's draws, applied in order, then normalized; the same key gives
// the same sample, another index other draws.
TEST(InputTransform, ASampleIsAPureFunctionOfItsKey) {
  const Tensor images = read_npy(fixture("image.npy"));
  InputTransform t;
  parse_layout("x", "nhwc", t);
  parse_augment("x", "hflip,crop:2,cutout:3", t);
  parse_normalize("x", "0.4914,0.4822,0.4465/0.247,0.243,0.261", t);
  auto sample = [&](int64_t epoch, int64_t index) {
    std::vector<float> out(297);
    transform_sample(t, images.data<uint8_t>(), DType::UInt8, kStored,
                     {.seed = 9, .epoch = epoch, .index = index}, out.data());
    return out;
  };
  EXPECT_EQ(sample(2, 7), sample(2, 7));
  EXPECT_NE(sample(2, 7), sample(2, 8));
  EXPECT_NE(sample(2, 7), sample(3, 7));
  // By hand: the same draws from the same stream.
  SampleRandom random(9, 2, 7);
  Image want = stored_image(0);
  if (draw_flip(random)) flip_horizontally(want);
  want = crop(want, draw_crop(random, 9, 11, 2));
  erase(want, draw_cutout(random, 9, 11, 3));
  normalize(want, kMean, kStd);
  EXPECT_EQ(sample(2, 7), want.data);
}

// Standard deviations of a count of `n` draws each hit with probability `p`.
double count_sigma(double n, double p) {
  return std::sqrt(n * p * (1 - p));
}

TEST(InputTransform, FlipsHalfTheSamples) {
  const int n = 20000;
  int flipped = 0;
  for (int i = 0; i < n; ++i) {
    SampleRandom random(1, 0, i);
    flipped += draw_flip(random);
  }
  EXPECT_LT(std::abs(flipped - n / 2.0), 4 * count_sigma(n, 0.5)) << flipped;
}

TEST(InputTransform, CropOffsetsAreUniformOverThePadding) {
  const int n = 18000, pad = 4, values = 2 * pad + 1;
  std::map<int64_t, int> tops, lefts;
  for (int i = 0; i < n; ++i) {
    SampleRandom random(2, 3, i);
    const Box box = draw_crop(random, 32, 32, pad);
    ASSERT_EQ(box.height, 32);
    ++tops[box.top];
    ++lefts[box.left];
  }
  ASSERT_EQ(tops.size(), static_cast<size_t>(values));
  ASSERT_EQ(tops.begin()->first, -pad);
  ASSERT_EQ(tops.rbegin()->first, pad);
  const double expected = static_cast<double>(n) / values, sigma = count_sigma(n, 1.0 / values);
  for (const auto& counts : {tops, lefts})
    for (const auto& [offset, count] : counts)
      EXPECT_LT(std::abs(count - expected), 4 * sigma) << offset;
}

TEST(InputTransform, CutoutCornersAreUniformInsideTheImage) {
  const int n = 20000;
  std::map<int64_t, int> tops;
  for (int i = 0; i < n; ++i) {
    SampleRandom random(4, 0, i);
    const Box box = draw_cutout(random, 10, 12, 8);
    ASSERT_GE(box.left, 0);
    ASSERT_LE(box.left + 8, 12);
    ++tops[box.top];
  }
  ASSERT_EQ(tops.size(), 3u);
  for (const auto& [top, count] : tops)
    EXPECT_LT(std::abs(count - n / 3.0), 4 * count_sigma(n, 1.0 / 3)) << top;
}

// The area share and log aspect ratio of the windows, against torchvision's get_params over
// 20000 draws (resized_crop_stats.npy): the means within 4 standard errors of both samples.
TEST(InputTransform, ResizedCropWindowsFollowTorchvisionsDistribution) {
  const Tensor stats = read_npy(fixture("resized_crop_stats.npy"));
  const double* want = stats.data<double>();
  const int n = 20000;
  double share = 0, share2 = 0, ratio = 0, ratio2 = 0;
  for (int i = 0; i < n; ++i) {
    SampleRandom random(6, 1, i);
    const Box box = draw_resized_crop(random, 32, 32);
    ASSERT_TRUE(box.top >= 0 && box.left >= 0 && box.top + box.height <= 32 &&
                box.left + box.width <= 32);
    const double s = static_cast<double>(box.height * box.width) / 1024;
    const double r = std::log(static_cast<double>(box.width) / static_cast<double>(box.height));
    share += s, share2 += s * s, ratio += r, ratio2 += r * r;
  }
  share /= n, ratio /= n;
  const double share_sd = std::sqrt(share2 / n - share * share);
  const double ratio_sd = std::sqrt(ratio2 / n - ratio * ratio);
  const double bound = 4 * std::sqrt(2.0 / n);  // two samples' standard errors, per sd
  EXPECT_LT(std::abs(share - want[0]), bound * want[1]) << share;
  EXPECT_LT(std::abs(ratio - want[2]), bound * want[3]) << ratio;
  EXPECT_NEAR(share_sd, want[1], 0.05 * want[1]);
  EXPECT_NEAR(ratio_sd, want[3], 0.05 * want[3]);
}

TEST(InputTransform, ResizedCropFallsBackToTheCentreCropOfTheNearestRatio) {
  // A 1x40 strip: no draw fits, so 10 tries then the widest 4:3 window, centred.
  SampleRandom random(0, 0, 0);
  const Box box = draw_resized_crop(random, 1, 40);
  EXPECT_EQ(box.height, 1);
  EXPECT_EQ(box.width, 1);  // round(1 * 4/3)
  EXPECT_EQ(box.left, 19);
}

TEST(InputTransform, BadOptionsAreOneLineEach) {
  InputTransform t;
  EXPECT_EQ(error_of([&] { parse_layout("x", "nwhc", t); }),
            "--layout x=nwhc: the layout is nhwc or nchw");
  EXPECT_EQ(error_of([&] { parse_normalize("x", "0.5,0.5", t); }),
            "--normalize x=0.5,0.5: give MEAN[,MEAN...]/STD[,STD...]");
  EXPECT_EQ(error_of([&] { parse_normalize("x", "0.5,a/1,1", t); }),
            "--normalize x=0.5,a/1,1: 'a' is not a number");
  EXPECT_EQ(error_of([&] { parse_normalize("x", "0.5/0", t); }),
            "--normalize x=0.5/0: std 0 is not a positive number");
  EXPECT_EQ(error_of([&] { parse_normalize("x", "0.5,0.5/1", t); }),
            "--normalize x=0.5,0.5/1: 2 means but 1 std");
  EXPECT_EQ(error_of([&] { parse_augment("x", "hflip,flip", t); }),
            "--augment x=hflip,flip: unknown augmentation 'flip' (hflip, crop:PAD, "
            "resized-crop:SIZE, cutout:SIZE)");
  EXPECT_EQ(error_of([&] { parse_augment("x", "crop:-1", t); }),
            "--augment x=crop:-1: crop's PAD must be an integer >= 0, got '-1'");
  EXPECT_EQ(error_of([&] { parse_augment("x", "cutout", t); }),
            "--augment x=cutout: cutout needs SIZE (cutout:SIZE)");
  EXPECT_EQ(error_of([&] { parse_augment("x", "hflip:1", t); }),
            "--augment x=hflip:1: hflip takes no number");

  InputTransform n;
  parse_normalize("x", "0.5,0.5/0.2,0.2", n);
  EXPECT_EQ(error_of([&] {
              transformed_sample_shape("x", n, {3, 8, 8}, DType::UInt8);
            }),
            "--normalize x=0.5,0.5/0.2,0.2: 2 means and stds for the 3 channels of input 'x'");
  InputTransform a;
  parse_augment("x", "hflip", a);
  EXPECT_EQ(error_of([&] { transformed_sample_shape("x", a, {16}, DType::Float32); }),
            "--augment x=hflip: input 'x' holds rows of shape [16]; augmentation is for images "
            "(rows of 3 dims, CHW or with --layout x=nhwc HWC)");
  InputTransform l;
  parse_layout("x", "nhwc", l);
  EXPECT_EQ(error_of([&] {
              transformed_sample_shape("x", l, {4, 4}, DType::UInt8);
            }),
            "--layout x=nhwc: input 'x' holds rows of shape [4, 4]; nhwc is for images (rows of "
            "3 dims, HWC)");
  InputTransform c;
  parse_augment("x", "cutout:9", c);
  EXPECT_EQ(error_of([&] {
              transformed_sample_shape("x", c, {3, 8, 8}, DType::UInt8);
            }),
            "--augment x=cutout:9: cutout:9 is larger than the 8x8 image");
  EXPECT_EQ(error_of([&] { transformed_sample_shape("x", n, {2}, DType::Bool); }),
            "input 'x' holds bool, which cannot be transformed (numbers only)");
}

}  // namespace
}  // namespace dprun::testing
