// Data-parallel throughput on CPU virtual devices, and what scatter + replicate + gather cost.
#include <benchmark/benchmark.h>

#include "bench_util.h"
#include "engine/parallel/data_parallel.h"

namespace dprun::bench {
namespace {

// args: batch, devices, threads per device
void BM_DataParallel(benchmark::State& state, const std::string& name) {
  int64_t batch = state.range(0);
  int devices = static_cast<int>(state.range(1));
  auto model = std::make_shared<Model>(load_model(model_path(name), Device::cpu(0)));
  DataParallelOptions options;
  for (int i = 0; i < devices; ++i) options.device_ids.push_back(Device::cpu(i));
  options.threads = static_cast<int>(state.range(2));
  DataParallel parallel(model, options);
  auto inputs = model_inputs(*model, batch);
  parallel.forward(inputs);
  for (auto _ : state) benchmark::DoNotOptimize(parallel.forward(inputs));
  state.counters["samples/s"] =
      benchmark::Counter(static_cast<double>(batch), benchmark::Counter::kIsIterationInvariantRate);
}
#define DPRUN_DP_BENCH(name)                      \
  BENCHMARK_CAPTURE(BM_DataParallel, name, #name) \
      ->ArgsProduct({{64, 256}, {1, 2}, {1}})     \
      ->Args({64, 1, 2})                          \
      ->Args({256, 1, 2})                         \
      ->ArgNames({"batch", "devices", "threads"}) \
      ->Unit(benchmark::kMillisecond)             \
      ->UseRealTime()
DPRUN_DP_BENCH(mlp);
DPRUN_DP_BENCH(cnn);
// One row of the tutorial classifier: the cost of a call beside its arithmetic, the figure
// bench/python/bench_module.py's `call` compares Python's dp(x) with.
BENCHMARK_CAPTURE(BM_DataParallel, classifier, "tutorial/classifier")
    ->ArgsProduct({{1}, {1, 2}, {1}})
    ->ArgNames({"batch", "devices", "threads"})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

// Share of a step spent outside the replicas (scatter + replicate + gather), with replicas
// cached (arg 1) or re-replicated on every call as PyTorch does (arg 0).
void BM_Overhead(benchmark::State& state, const std::string& name) {
  auto model = std::make_shared<Model>(load_model(model_path(name), Device::cpu(0)));
  DataParallelOptions options;
  options.device_ids = {Device::cpu(0), Device::cpu(1)};
  options.threads = 1;
  options.cache_replicas = state.range(0) != 0;
  DataParallel parallel(model, options);
  auto inputs = model_inputs(*model, 64);
  parallel.forward(inputs);
  double overhead = 0, total = 0;
  for (auto _ : state) {
    parallel.forward(inputs);
    auto run = parallel.last_run();
    overhead += run.scatter_seconds + run.replicate_seconds + run.gather_seconds;
    total += run.scatter_seconds + run.replicate_seconds + run.apply_seconds + run.gather_seconds;
  }
  state.counters["overhead_%"] = 100.0 * overhead / total;
  state.counters["overhead_us"] =
      benchmark::Counter(overhead * 1e6 / static_cast<double>(state.iterations()));
}
BENCHMARK_CAPTURE(BM_Overhead, mlp, "mlp")
    ->Arg(1)
    ->Arg(0)
    ->ArgName("cached")
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_Overhead, cnn, "cnn")
    ->Arg(1)
    ->Arg(0)
    ->ArgName("cached")
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
}  // namespace dprun::bench
