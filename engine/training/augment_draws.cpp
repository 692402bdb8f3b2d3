#include "engine/training/augment_draws.h"

#include <algorithm>
#include <cmath>

namespace dprun {

namespace {

// Python's round(): halves to even, as the default rounding mode does.
int64_t python_round(double v) {
  return static_cast<int64_t>(std::nearbyint(v));
}

}  // namespace

bool draw_flip(SampleRandom& random) {
  return random.uniform() < 0.5f;
}

Box draw_crop(SampleRandom& random, int64_t height, int64_t width, int64_t pad) {
  const int64_t top = random.integer(0, 2 * pad), left = random.integer(0, 2 * pad);
  return {top - pad, left - pad, height, width};
}

Box draw_resized_crop(SampleRandom& random, int64_t height, int64_t width) {
  const double area = static_cast<double>(height * width);
  // torchvision draws in float32: log of the ratio bounds, then uniform, then exp.
  const float log_low = std::log(3.0f / 4.0f), log_high = std::log(4.0f / 3.0f);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const float scale = 0.08f + random.uniform() * (1.0f - 0.08f);
    const double target = area * static_cast<double>(scale);
    const float ratio = std::exp(log_low + random.uniform() * (log_high - log_low));
    const int64_t w = python_round(std::sqrt(target * static_cast<double>(ratio)));
    const int64_t h = python_round(std::sqrt(target / static_cast<double>(ratio)));
    if (0 < w && w <= width && 0 < h && h <= height) {
      const int64_t top = random.integer(0, height - h), left = random.integer(0, width - w);
      return {top, left, h, w};
    }
  }
  const double in_ratio = static_cast<double>(width) / static_cast<double>(height);
  int64_t w = width, h = height;
  if (in_ratio < 3.0 / 4.0) {
    h = python_round(static_cast<double>(w) / (3.0 / 4.0));
  } else if (in_ratio > 4.0 / 3.0) {
    w = python_round(static_cast<double>(h) * (4.0 / 3.0));
  }
  return {(height - h) / 2, (width - w) / 2, h, w};
}

Box draw_cutout(SampleRandom& random, int64_t height, int64_t width, int64_t size) {
  const int64_t top = random.integer(0, height - size), left = random.integer(0, width - size);
  return {top, left, size, size};
}

Box center_box(int64_t height, int64_t width, int64_t size) {
  return {python_round(static_cast<double>(height - size) / 2.0),
          python_round(static_cast<double>(width - size) / 2.0), size, size};
}

std::pair<int64_t, int64_t> shorter_side_resized(int64_t height, int64_t width, int64_t size) {
  const int64_t shorter = std::min(height, width), longer = std::max(height, width);
  const auto resized_longer = static_cast<int64_t>(
      static_cast<double>(size) * static_cast<double>(longer) / static_cast<double>(shorter));
  return height <= width ? std::pair{size, resized_longer} : std::pair{resized_longer, size};
}

}  // namespace dprun
