// One training step (Trainer::step with SGD and momentum) of the MLP 784-512-256-10 with
// GELU and LogSoftmax (as torch.onnx.export writes it), at batch 64 and 256, on one and two
// CPU devices of one thread each. The ratio of the two is the data-parallel speed-up of training;
// run with random interleaving so that both see the same machine:
//   build/dprun_bench --benchmark_filter=TrainStep --benchmark_repetitions=10
//     --benchmark_enable_random_interleaving=true
#include <benchmark/benchmark.h>

#include <cmath>

#include "bench_util.h"
#include "engine/training/trainer.h"

namespace dprun::bench {
namespace {

// Linear layers as Gemm(x, W, b) with W [out, in] and transB = 1, GELU in its erf form.
std::shared_ptr<Graph> gelu_mlp(const std::vector<int64_t>& widths) {
  auto g = std::make_shared<Graph>();
  g->opset_imports[""] = 17;
  g->inputs.push_back(
      {"x", {DType::Float32, SymbolicShape{Dim::named("batch"), Dim::known(widths[0])}}});
  auto node = [&](const std::string& op, std::vector<std::string> inputs, const std::string& out,
                  std::map<std::string, Attribute> attributes = {}) {
    Node n;
    n.name = out;
    n.op_type = op;
    n.inputs = std::move(inputs);
    n.outputs = {out};
    n.attributes = std::move(attributes);
    g->nodes.push_back(std::move(n));
  };
  g->initializers["sqrt2"] = Tensor::scalar<float>(std::sqrt(2.0f));
  g->initializers["one"] = Tensor::scalar<float>(1.0f);
  g->initializers["half"] = Tensor::scalar<float>(0.5f);
  std::string x = "x";
  for (size_t l = 0; l + 1 < widths.size(); ++l) {
    const std::string k = std::to_string(l);
    const float bound = 1.0f / std::sqrt(static_cast<float>(widths[l]));
    Tensor w = random_floats({widths[l + 1], widths[l]}, static_cast<uint32_t>(2 * l + 1));
    Tensor b = random_floats({widths[l + 1]}, static_cast<uint32_t>(2 * l + 2));
    for (Tensor* t : {&w, &b})
      for (int64_t i = 0; i < t->numel(); ++i) t->data<float>()[i] *= bound;
    g->initializers["w" + k] = w;
    g->initializers["b" + k] = b;
    node("Gemm", {x, "w" + k, "b" + k}, "h" + k, {{"transB", Attribute::of_int(1)}});
    x = "h" + k;
    if (l + 2 == widths.size()) break;
    node("Div", {x, "sqrt2"}, "d" + k);
    node("Erf", {"d" + k}, "e" + k);
    node("Add", {"e" + k, "one"}, "a" + k);
    node("Mul", {x, "a" + k}, "m" + k);
    node("Mul", {"m" + k, "half"}, "gelu" + k);
    x = "gelu" + k;
  }
  node("LogSoftmax", {x}, "log_probs", {{"axis", Attribute::of_int(1)}});
  g->outputs.push_back({"log_probs", {DType::Float32, std::nullopt}});
  return g;
}

// args: batch, devices (one thread each), half (TrainingGraphSpec::precision: 0 float32, 1
// bfloat16, 2 float16 with loss scaling)
void BM_TrainStep(benchmark::State& state) {
  const int64_t kBatch = state.range(0);
  const int devices = static_cast<int>(state.range(1));
  auto model = std::make_shared<Model>(gelu_mlp({784, 512, 256, 10}), Device::cpu(0));
  TrainerOptions options;
  options.training.loss = {.kind = LossKind::Nll};
  constexpr DType kPrecisions[] = {DType::Float32, DType::BFloat16, DType::Float16};
  options.training.precision = kPrecisions[state.range(2)];
  for (int i = 0; i < devices; ++i) options.parallel.device_ids.push_back(Device::cpu(i));
  options.parallel.threads = 1;
  Trainer trainer(model, options);
  Sgd optimizer(trainer.parameters(), {.lr = 0.01, .momentum = 0.9});
  Tensor x = random_floats({kBatch, 784});
  Tensor target = Tensor::empty({kBatch}, DType::Int64);
  for (int64_t i = 0; i < kBatch; ++i) target.data<int64_t>()[i] = (i * 7) % 10;
  for (int i = 0; i < 3; ++i) trainer.step({x}, target, optimizer);  // buffers, replicas
  for (auto _ : state) benchmark::DoNotOptimize(trainer.step({x}, target, optimizer));
  state.counters["samples/s"] = benchmark::Counter(static_cast<double>(kBatch),
                                                   benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_TrainStep)
    ->ArgsProduct({{64, 256}, {1, 2}, {0, 1, 2}})
    ->ArgNames({"batch", "devices", "half"})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
}  // namespace dprun::bench
