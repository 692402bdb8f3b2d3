// All-reduce time and bandwidth of the MPI process group against message size, for both
// reduction orders. Run it under mpirun, e.g.
//   mpirun -np 2 build/bench/dprun_allreduce_bench [MAX_MIB]
// Rank 0 prints, per float32 message size: the mean time of one all_reduce_sum (started and
// waited for, every rank lined up by a barrier before each timed batch), the algorithm
// bandwidth (bytes / time) and the bus bandwidth (bytes / time * 2 (n-1) / n: what each rank
// sends and receives in a ring or reduce-scatter + all-gather all-reduce).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "engine/distributed/mpi_process_group.h"

namespace {

using Clock = std::chrono::steady_clock;

// Mean seconds per all-reduce of `count` floats: repeats until 0.2 s have passed (at least 5).
double time_all_reduce(dprun::ProcessGroup& group, int64_t count, dprun::ReduceOrder order) {
  dprun::Tensor t = dprun::Tensor::zeros({count}, dprun::DType::Float32);
  for (int i = 0; i < 2; ++i) dprun::all_reduce_sum_now(group, t, order);
  int reps = 5;
  for (;;) {
    group.barrier();
    auto start = Clock::now();
    for (int i = 0; i < reps; ++i) dprun::all_reduce_sum_now(group, t, order);
    double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    // Every rank takes the slowest rank's time, so they all agree on whether to go on.
    double slowest = 0;
    for (double s : dprun::all_gather_values(group, seconds)) slowest = std::max(slowest, s);
    if (slowest >= 0.2 || reps >= (1 << 20)) return slowest / reps;
    reps *= 4;
  }
}

}  // namespace

int main(int argc, char** argv) {
  try {
    auto group = dprun::mpi_world_process_group();
    int64_t max_bytes = (argc > 1 ? std::atoll(argv[1]) : 64) << 20;
    double ring = 2.0 * (group->size() - 1) / group->size();
    if (group->rank() == 0)
      std::printf(
          "%d ranks; float32 sums; times are means per all-reduce\n\n%12s %12s %10s %10s "
          "%14s %10s\n",
          group->size(), "bytes", "any: us", "alg GB/s", "bus GB/s", "rank order: us", "bus GB/s");
    for (int64_t bytes = 4; bytes <= max_bytes; bytes *= 4) {
      double any = time_all_reduce(*group, bytes / 4, dprun::ReduceOrder::Any);
      double ordered = time_all_reduce(*group, bytes / 4, dprun::ReduceOrder::RankOrder);
      if (group->rank() == 0)
        std::printf("%12lld %12.1f %10.3f %10.3f %14.1f %10.3f\n", static_cast<long long>(bytes),
                    any * 1e6, bytes / any / 1e9, bytes / any / 1e9 * ring, ordered * 1e6,
                    bytes / ordered / 1e9 * ring);
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dprun_allreduce_bench: %s\n", e.what());
    return 1;
  }
}
