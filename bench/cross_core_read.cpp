// How fast one core reads data that another core has just written, against data it wrote
// itself: the cost that a data-parallel step pays for every parameter and gradient that moves
// between devices (replica gradients summed on one core, updated parameters read by the
// other replicas). Two threads, pinned to the given cores, take turns: one writes a buffer,
// the other reads it back, and the read is timed.
//   build/bench/dprun_cross_core_bench [BYTES]     (default 2 MiB, the MLP's gradients)
// prints the read bandwidth for each (writer, reader) pair of cores 0 and 1.
#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

namespace {

bool pin_to(int core) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(core, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof(set), &set) == 0;
}

// Seconds per read of `floats` floats written by `writer` and read by `reader`.
double read_seconds(int writer, int reader, size_t floats, int rounds) {
  std::vector<float> buffer(floats, 0.0f);
  std::atomic<int> turn{0};  // 0: the writer's, 1: the reader's
  double total = 0;
  std::atomic<float> sink{0};
  std::thread write([&] {
    pin_to(writer);
    for (int r = 0; r < rounds; ++r) {
      while (turn.load(std::memory_order_acquire) != 0) {
      }
      for (size_t i = 0; i < floats; ++i) buffer[i] = static_cast<float>(r + i);
      turn.store(1, std::memory_order_release);
    }
  });
  std::thread read([&] {
    pin_to(reader);
    for (int r = 0; r < rounds; ++r) {
      while (turn.load(std::memory_order_acquire) != 1) {
      }
      auto start = std::chrono::steady_clock::now();
      float lanes[16] = {};  // independent sums, so that the loop vectorises
      for (size_t i = 0; i + 16 <= floats; i += 16)
        for (int k = 0; k < 16; ++k) lanes[k] += buffer[i + k];
      total += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      sink.store(sink.load() + lanes[0] + lanes[15]);
      turn.store(0, std::memory_order_release);
    }
  });
  write.join();
  read.join();
  return total / rounds;
}

}  // namespace

int main(int argc, char** argv) {
  const size_t bytes = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : size_t(2) << 20;
  if (bytes < 64 || std::thread::hardware_concurrency() < 2) {
    std::fprintf(stderr, "usage: %s [BYTES >= 64]; needs two cores\n", argv[0]);
    return 1;
  }
  const size_t floats = bytes / sizeof(float);
  for (int writer : {0, 1})
    for (int reader : {0, 1}) {
      double s = read_seconds(writer, reader, floats, 200);
      std::printf("written on core %d, read on core %d: %8.1f us, %6.1f GB/s\n", writer, reader,
                  s * 1e6, static_cast<double>(bytes) / s / 1e9);
    }
  return 0;
}
