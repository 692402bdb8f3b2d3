// Every op case (ops/<family>/*_cases.cpp) timed on each device type this machine has: cpu:0, sim:0
// and, with a GPU, cuda:0. Each benchmark runs its case's one-node model on inputs already on the
// device, so a figure is what one plan step costs at the tables' shapes: the kernel, its launch
// and the executor around it. BM_OpCase/<Family_Case>/<device>; choose with
// --benchmark_filter (there are about 1400 cases per device).
#include <benchmark/benchmark.h>

#include "engine/backend.h"
#include "op_cases/op_cases.h"
#include "op_test_util.h"

namespace dprun::bench {
namespace {

void time_case(benchmark::State& state, const testing::OpCase& c, Device device) {
  const std::vector<Tensor> values = testing::make_inputs(c, 1234);
  std::vector<Tensor> fed;
  std::map<std::string, Tensor> initializers;
  for (size_t i = 0, k = 0; i < c.node.inputs.size() && k < values.size(); ++i) {
    if (c.node.inputs[i].empty()) continue;
    if (c.inputs[k].constant)
      initializers[c.node.inputs[i]] = values[k];
    else
      fed.push_back(values[k]);
    ++k;
  }
  Model model(testing::single_node_graph(c.node, fed, c.opset, c.node.domain, initializers),
              device);
  for (Tensor& t : fed) t = t.to(device);
  model.run(fed);  // builds the kernels and buffers
  for (auto _ : state) benchmark::DoNotOptimize(model.run(fed));
}

// The devices to time on: every device type with a usable device 0.
std::vector<Device> devices() {
  std::vector<Device> out = {Device::cpu(), Device::sim(0)};
  if (backend_available(DeviceType::CUDA)) out.push_back(Device::cuda(0));
  return out;
}

}  // namespace

void register_op_case_benchmarks() {
  for (const Device& device : devices())
    for (const testing::OpCase& c : testing::all_op_cases())
      benchmark::RegisterBenchmark(
          ("BM_OpCase/" + c.name + "/" + device.to_string()).c_str(),
          [c, device](benchmark::State& state) { time_case(state, c, device); })
          ->UseRealTime();
}

}  // namespace dprun::bench
