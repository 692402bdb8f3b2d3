// Stream order by construction (engine/stream_order.h) on the simulated devices: no host wait
// ends a run, so each stream boundary needs its event, and the sim catches each one missing.
// For every kind of wait, DPRUN_SIM_DROP_WAIT drops it (sim_drop_wait.h): the engine's own
// data-parallel path then fails as a race would on a GPU (or, for record_stream, the release
// of the memory stops the process), and with the switch off the same path runs and is right.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "engine/backend.h"
#include "engine/model.h"
#include "engine/parallel/comm.h"
#include "engine/parallel/data_parallel.h"
#include "engine/parallel/parallel_apply.h"
#include "engine/parallel/replicate.h"
#include "error_test_util.h"
#include "graph_test_util.h"
#include "sim_drop_wait_util.h"

namespace dprun {
namespace {

using testing::DropWait;
using testing::error_of;
using ::testing::HasSubstr;

const Device kSim0 = Device::sim(0);
const Device kSim1 = Device::sim(1);
constexpr char kRace[] = "and the host has not waited for that stream since: the two race on a GPU";

std::vector<float> host_values(const Tensor& t) {
  Tensor h = t.to(Device::cpu());
  return std::vector<float>(h.data<float>(), h.data<float>() + h.numel());
}

// y = Relu(x), node "relu".
std::shared_ptr<Graph> relu_graph() {
  auto g = testing::make_graph({testing::make_node("Relu", {"x"}, {"y"})}, {{"x", DType::Float32}},
                               {"y"});
  g->nodes[0].name = "relu";
  g->opset_imports[""] = 17;
  return g;
}

const Tensor kRows = Tensor::from_vector<float>({2, 3}, {-1, 2, -3, 4, -5, 6});

// The rows of kRows each on one device, made on the default stream, and the Relu model's
// replicas on sim:0 and sim:1.
struct TwoReplicas {
  Model base{relu_graph(), kSim0};
  std::vector<std::shared_ptr<Model>> replicas = replicate(base, {kSim0, kSim1});
  std::vector<std::vector<Tensor>> inputs = {{kRows.narrow(0, 0, 1).to(kSim0)},
                                             {kRows.narrow(0, 1, 1).to(kSim1)}};
};

// With the waits of `kind` dropped, `run` fails as a race whose message holds each of `parts`;
// once the host has waited for what that try left queued, `run` with every wait succeeds.
template <class Run>
void expect_wait_needed(const char* kind, Run&& run, std::initializer_list<const char*> parts) {
  {
    DropWait drop(kind);
    const std::string error = run();
    for (const char* part : parts) EXPECT_THAT(error, HasSubstr(part));
    EXPECT_THAT(error, HasSubstr(kRace));
  }
  backend_for(kSim0).synchronize(kSim0);
  backend_for(kSim1).synchronize(kSim1);
  EXPECT_EQ(run(), "no error");
}

// (a) gather's copies read the replicas' outputs, which their runs' streams wrote: the copy's
// stream waits for the runs' events.
std::string data_parallel_forward(std::vector<float>* result) {
  DataParallelOptions options;
  options.device_ids = {kSim0, kSim1};
  DataParallel dp(std::make_shared<Model>(relu_graph(), kSim0), options);
  return error_of([&] { *result = host_values(dp.forward({kRows})[0]); });
}

TEST(StreamOrder, ACopyWaitsForTheStreamThatWroteItsSource) {
  std::vector<float> result;
  expect_wait_needed(
      "copy", [&] { return data_parallel_forward(&result); },
      {"a copy of 12 bytes from sim:", "memory that Relu kernel ('relu') wrote on stream"});
  EXPECT_EQ(result, (std::vector<float>{0, 2, 0, 4, 0, 6}));
}

// (b) the replicas' runs read their inputs, allocated on the default stream, on their own
// streams; the inputs are freed once parallel_apply returns, before anyone waited for those
// streams. The allocator must order the reuse after them (record_stream).
void free_inputs_of_a_parallel_apply(bool drop) {
  std::unique_ptr<DropWait> dropped;
  if (drop) dropped = std::make_unique<DropWait>("record_stream");
  TwoReplicas two;
  std::vector<std::vector<Tensor>> outputs = parallel_apply(two.replicas, two.inputs);
  two.inputs.clear();  // freed on the default stream while the runs' streams may read them
  dropped.reset();
  if (host_values(outputs[0][0]) != std::vector<float>{0, 2, 0} ||
      host_values(outputs[1][0]) != std::vector<float>{4, 0, 6})
    std::abort();
}

TEST(StreamOrderDeathTest, MemoryUsedOnAnotherStreamIsReusedOnlyAfterThatStreamsWork) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(free_inputs_of_a_parallel_apply(true),
               "dprun: sim:[01]: memory freed on the default stream of sim:[01] while Relu kernel "
               "\\('relu'\\) on stream [0-9]+ of sim:[01] may still use it");
  free_inputs_of_a_parallel_apply(false);
}

// (c) a reduction of the replicas' outputs (the gradient sum of training): the collective's
// streams wait for the runs' events, and the host does not.
std::string reduce_outputs(std::vector<float>* sum) {
  TwoReplicas two;
  std::vector<std::vector<Tensor>> outputs = parallel_apply(two.replicas, two.inputs);
  return error_of([&] { *sum = host_values(reduce_add_coalesced(outputs, kSim0)[0]); });
}

TEST(StreamOrder, ACollectiveWaitsForTheStreamsThatWroteItsInputs) {
  std::vector<float> sum;
  expect_wait_needed("collective", [&] { return reduce_outputs(&sum); },
                     {"a reduce over sim devices on the default stream of sim:",
                      "memory that Relu kernel ('relu') wrote on stream"});
  EXPECT_EQ(sum, (std::vector<float>{4, 2, 6}));
}

// A run's output fed to the next run: the second run's stream waits for the first's event.
std::string run_twice(std::vector<float>* result) {
  Model model(relu_graph(), kSim0);
  return error_of([&] {
    Tensor once = model.run({kRows.to(kSim0)})[0];
    *result = host_values(model.run({once})[0]);
  });
}

TEST(StreamOrder, ARunWaitsForTheStreamThatWroteItsInputs) {
  std::vector<float> result;
  expect_wait_needed(
      "handover", [&] { return run_twice(&result); },
      {"Relu kernel ('relu') on stream", "reads memory that Relu kernel ('relu') wrote on stream"});
  EXPECT_EQ(result, (std::vector<float>{0, 2, 0, 4, 0, 6}));
}

TEST(StreamOrder, TheSwitchNamesKindsSeparatedByCommas) {
  DropWait drop("copy,collective");
  std::vector<float> sum;
  EXPECT_THAT(reduce_outputs(&sum), HasSubstr(kRace));
  backend_for(kSim0).synchronize(kSim0);
  backend_for(kSim1).synchronize(kSim1);
}

// The CPU has no streams: nothing of this applies, and the same paths run as ever.
TEST(StreamOrder, CpuDevicesAreUnaffectedByTheSwitch) {
  DropWait drop("copy,collective,handover,record_stream");
  DataParallelOptions options;
  options.device_ids = {Device::cpu(0), Device::cpu(1)};
  DataParallel dp(std::make_shared<Model>(relu_graph(), Device::cpu(0)), options);
  EXPECT_EQ(host_values(dp.forward({kRows})[0]), (std::vector<float>{0, 2, 0, 4, 0, 6}));
}

}  // namespace
}  // namespace dprun
