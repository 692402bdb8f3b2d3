// dprun_bench's main: Google Benchmark's, after the benchmarks made from the op case tables
// are registered (they exist only once static initialisation has filled the tables).
#include <benchmark/benchmark.h>

namespace dprun::bench {
void register_op_case_benchmarks();
}

int main(int argc, char** argv) {
  dprun::bench::register_op_case_benchmarks();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
