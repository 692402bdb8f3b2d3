// Single-device inference of the bundled models: batch 1 and 64, 1 and 2 intra-op threads.
#include <benchmark/benchmark.h>

#include "bench_util.h"

namespace dprun::bench {
namespace {

void BM_Model(benchmark::State& state, const std::string& name) {
  Model model = load_model(model_path(name), Device::cpu());
  int64_t batch = state.range(0);
  RunOptions options;
  options.threads = static_cast<int>(state.range(1));
  auto inputs = model_inputs(model, batch);
  model.run(inputs, options);  // warm-up: primitive caches, allocator
  for (auto _ : state) benchmark::DoNotOptimize(model.run(inputs, options));
  state.counters["samples/s"] =
      benchmark::Counter(static_cast<double>(batch), benchmark::Counter::kIsIterationInvariantRate);
}

#define DPRUN_MODEL_BENCH(name)            \
  BENCHMARK_CAPTURE(BM_Model, name, #name) \
      ->ArgsProduct({{1, 64}, {1, 2}})     \
      ->ArgNames({"batch", "threads"})     \
      ->Unit(benchmark::kMillisecond)      \
      ->UseRealTime()
DPRUN_MODEL_BENCH(mlp);
DPRUN_MODEL_BENCH(cnn);
DPRUN_MODEL_BENCH(transformer);

}  // namespace
}  // namespace dprun::bench
