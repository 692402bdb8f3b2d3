#pragma once
// The random draws of one sample's augmentation: a counter-based stream keyed by the run's
// seed, the epoch and the sample's index in its file. Nothing else enters the key, so the same
// sample is augmented the same way whichever rank, device or batch of a step takes it, with or
// without gradient accumulation, and in a resumed run; the draws of different samples need no
// shared state, so any thread may make them in any order.
#include <cstdint>

#include "engine/random_seed.h"

namespace dprun {

class SampleRandom {
 public:
  SampleRandom(uint64_t seed, int64_t epoch, int64_t index)
      : key_(derive_seed(derive_seed(derive_seed(seed, kStream), static_cast<uint64_t>(epoch)),
                         static_cast<uint64_t>(index))) {}

  /// The next 64 random bits.
  uint64_t bits() { return derive_seed(key_, counter_++); }
  /// Uniform in [0, 1), a float32 of 24 random bits (as torch.rand draws a float32).
  float uniform() { return static_cast<float>(bits() >> 40) * (1.0f / 16777216.0f); }
  /// Uniform in [lo, hi] (lo <= hi, hi - lo < 2^32).
  int64_t integer(int64_t lo, int64_t hi) {
    const uint64_t n = static_cast<uint64_t>(hi - lo) + 1;
    return lo + static_cast<int64_t>(((bits() >> 32) * n) >> 32);
  }

 private:
  // Apart from the streams derive_seed gives Dropout from the same seed.
  static constexpr uint64_t kStream = 0x617567'6d656e74ULL;  // "augment"
  uint64_t key_;
  uint64_t counter_ = 0;
};

}  // namespace dprun
