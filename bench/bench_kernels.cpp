// Conv and MatMul kernels: GFLOP/s of the chosen (oneDNN) kernel through the executor.
#include <benchmark/benchmark.h>

#include "bench_util.h"

namespace dprun::bench {
namespace {

Attribute ints(std::vector<int64_t> v) {
  Attribute a;
  a.kind = Attribute::Kind::Ints;
  a.ints = std::move(v);
  return a;
}

// ResNet-style 3x3 conv: batch N, C=K=state.range(1) channels, 56x56.
void BM_Conv3x3(benchmark::State& state) {
  int64_t n = state.range(0), c = state.range(1), hw = 56;
  auto model = single_node_model("Conv", {n, c, hw, hw}, {{"w", random_floats({c, c, 3, 3})}},
                                 {{"pads", ints({1, 1, 1, 1})}});
  RunOptions options;
  options.threads = static_cast<int>(state.range(2));
  Tensor x = random_floats({n, c, hw, hw});
  model->run({x}, options);
  for (auto _ : state) benchmark::DoNotOptimize(model->run({x}, options));
  double flops = 2.0 * static_cast<double>(n * c * c * 9 * hw * hw);
  state.counters["GFLOP/s"] =
      benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_Conv3x3)
    ->ArgsProduct({{1, 8}, {64}, {1, 2}})
    ->ArgNames({"batch", "channels", "threads"})
    ->UseRealTime();

void BM_MatMul(benchmark::State& state) {
  int64_t m = state.range(0), k = state.range(1), n = state.range(1);
  auto model = single_node_model("MatMul", {m, k}, {{"b", random_floats({k, n})}});
  RunOptions options;
  options.threads = static_cast<int>(state.range(2));
  Tensor x = random_floats({m, k});
  model->run({x}, options);
  for (auto _ : state) benchmark::DoNotOptimize(model->run({x}, options));
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * static_cast<double>(m * k * n) * 1e-9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_MatMul)
    ->ArgsProduct({{64, 512}, {1024}, {1, 2}})
    ->ArgNames({"m", "k", "threads"})
    ->UseRealTime();

}  // namespace
}  // namespace dprun::bench
