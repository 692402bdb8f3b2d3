#pragma once
// Seeds of independent random streams derived from one seed, so that runs repeat: a training
// run's seed gives each step, rank and replica its own stream, and each node of a run its own.
#include <cstdint>

namespace dprun {

/// A seed for stream `stream` of `seed`: splitmix64 of their combination, so nearby seeds and
/// streams give unrelated values.
constexpr uint64_t derive_seed(uint64_t seed, uint64_t stream) {
  uint64_t z = seed + 0x9e3779b97f4a7c15ULL * (stream + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

}  // namespace dprun
