#pragma once
// Polling before blocking. Waking a blocked thread costs tens of microseconds on an idle
// machine and can cost a millisecond on a busy one, as much as a small model's node; threads
// that hand each other work many times a millisecond (device workers, replicas meeting in a
// sum) poll for a short while first, where a core is left for them.
#include <chrono>
#include <thread>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace dprun {

/// How long a thread polls before it blocks.
inline constexpr int kSpinMicroseconds = 50;

/// A hint to the core that this is a spin loop.
inline void relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#else
  std::this_thread::yield();
#endif
}

/// Calls ready() until it returns true or kSpinMicroseconds pass; returns its last answer.
template <class Ready>
bool spin_until(Ready&& ready) {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::microseconds(kSpinMicroseconds);
  for (int i = 0;; ++i) {
    if (ready()) return true;
    relax();
    if ((i & 63) == 63 && std::chrono::steady_clock::now() > deadline) return ready();
  }
}

}  // namespace dprun
