#include "ops/attention/attention_rows.h"

#include "engine/simd_clones.h"

namespace dprun::attention {
namespace {

// Lanes of the dot product: independent sums vectorise without reassociation flags.
constexpr int64_t kLanes = 16;

DPRUN_SIMD_CLONES float dot(const float* a, const float* b, int64_t n) {
  float lane[kLanes] = {};
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int64_t k = 0; k < kLanes; ++k) lane[k] += a[j + k] * b[j + k];
  float sum = 0;
  for (float v : lane) sum += v;
  for (; j < n; ++j) sum += a[j] * b[j];
  return sum;
}

}  // namespace

DPRUN_SIMD_CLONES void scale_scores(float* y, int64_t n, float scale, const float* m,
                                    int64_t step) {
  if (!m) {
    for (int64_t j = 0; j < n; ++j) y[j] *= scale;
  } else if (step == 1) {
    for (int64_t j = 0; j < n; ++j) y[j] = y[j] * scale + m[j];
  } else {
    for (int64_t j = 0; j < n; ++j) y[j] = y[j] * scale + m[j * step];
  }
}

DPRUN_SIMD_CLONES void fill_scores(float* y, int64_t n, float scale, const bool* c, int64_t step,
                                   bool where, float fill) {
  if (step == 1) {
    for (int64_t j = 0; j < n; ++j) y[j] = c[j] == where ? fill : y[j] * scale;
  } else {
    for (int64_t j = 0; j < n; ++j) y[j] = c[j * step] == where ? fill : y[j] * scale;
  }
}

DPRUN_SIMD_CLONES void score_gradient(const float* p, float* d, int64_t n, float scale,
                                      const bool* c, int64_t step, bool where) {
  const float total = dot(p, d, n);
  for (int64_t j = 0; j < n; ++j) d[j] = scale * p[j] * (d[j] - total);
  if (!c) return;
  if (step == 1) {
    for (int64_t j = 0; j < n; ++j) d[j] = c[j] == where ? 0.0f : d[j];
  } else {
    for (int64_t j = 0; j < n; ++j) d[j] = c[j * step] == where ? 0.0f : d[j];
  }
}

}  // namespace dprun::attention
