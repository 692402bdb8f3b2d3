// The stream checks of the simulated devices (engine/backends/sim/sim_streams.h): work that
// relies on work of another stream that the host has not waited for fails, naming both pieces
// of work and their streams, and each way of waiting that a GPU offers makes it pass. Copies
// and collectives order themselves by events (engine/stream_order.h): the tests of the checks
// drop those waits (DPRUN_SIM_DROP_WAIT) to show what the sim sees without them.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "accelerator_test_util.h"
#include "engine/backend.h"
#include "engine/backends/sim/sim_streams.h"
#include "engine/kernel.h"
#include "engine/model.h"
#include "engine/parallel/comm.h"
#include "engine/parallel/data_parallel.h"
#include "error_test_util.h"
#include "graph_test_util.h"
#include "sim_drop_wait_util.h"

namespace dprun {
namespace {

using testing::DropWait;
using testing::error_of;

const Device kSim0 = Device::sim(0);

std::vector<float> host_values(const Tensor& t) {
  Tensor h = t.to(Device::cpu());
  return std::vector<float>(h.data<float>(), h.data<float>() + h.numel());
}

// An execution context of sim:0, current on this thread until destroyed, and its stream.
struct Stream {
  std::unique_ptr<ExecutionContext> context =
      backend_for(kSim0).create_execution_context(kSim0, {});
  SimStreamId id = sim_current_stream(kSim0);
  std::string name() const { return "stream " + std::to_string(id) + " of sim:0"; }
};

std::string race(const std::string& later, const Stream& later_stream, const char* verb,
                 const std::string& earlier, const std::string& earlier_stream,
                 const char* earlier_verb) {
  return "sim:0: " + later + " on " + later_stream.name() + " " + verb + " memory that " + earlier +
         " " + earlier_verb + " on " + earlier_stream +
         ", and the host has not waited for that stream since: the two race on a GPU";
}

const Tensor kValues = Tensor::from_vector<float>({4}, {1, 2, 3, 4});
constexpr char kUpload[] = "a copy of 16 bytes from cpu:0 to sim:0";
constexpr char kOnDevice[] = "a copy of 16 bytes from sim:0 to sim:0";

TEST(SimStreams, AContextHasAStreamOfItsOwnAndNoContextMeansTheDefaultStream) {
  const SimStreamId outside = sim_current_stream(kSim0);
  EXPECT_TRUE(sim_is_default_stream(outside));
  EXPECT_EQ(sim_stream_name(outside), "the default stream of sim:0");
  {
    Stream a;
    EXPECT_NE(a.id, outside);
    EXPECT_FALSE(sim_is_default_stream(a.id));
    Stream b;
    EXPECT_NE(b.id, a.id);
    EXPECT_EQ(sim_stream_name(b.id), b.name());
  }
  EXPECT_EQ(sim_current_stream(kSim0), outside);
  EXPECT_NE(sim_current_stream(Device::sim(1)), outside);
}

TEST(SimStreams, ReadingWhatAnotherStreamWroteWaitsForThatStream) {
  Tensor written = Tensor::empty({4}, DType::Float32, kSim0);
  Tensor copy = Tensor::empty({4}, DType::Float32, kSim0);
  Stream a;
  written.copy_from(kValues);  // queued on a; a copy from pageable memory does not wait
  {
    Stream b;
    {
      DropWait drop("copy");
      EXPECT_EQ(error_of([&] { copy.copy_from(written); }),
                race(kOnDevice, b, "reads", kUpload, a.name(), "wrote"));
    }
    EXPECT_EQ(error_of([&] { copy.copy_from(written); }), "no error");  // waits for a's event
    a.context->synchronize();
    copy.copy_from(written);
    b.context->synchronize();
  }
  EXPECT_EQ(host_values(copy), (std::vector<float>{1, 2, 3, 4}));
}

TEST(SimStreams, WritingWhatAnotherStreamReadsWaitsForThatStream) {
  Tensor read = kValues.to(kSim0);
  Tensor copy = Tensor::empty({4}, DType::Float32, kSim0);
  Stream a;
  copy.copy_from(read);  // a reads `read`
  {
    Stream b;
    DropWait drop("copy");
    EXPECT_EQ(error_of([&] { read.copy_from(kValues); }),
              race(kUpload, b, "writes", kOnDevice, a.name(), "read"));
    backend_for(kSim0).synchronize(kSim0);  // waits for every stream of the device
    read.copy_from(kValues);
  }
  backend_for(kSim0).synchronize(kSim0);  // before the tensors are freed
}

TEST(SimStreams, WritingWhatAnotherStreamWroteWaitsForThatStream) {
  Tensor twice = Tensor::empty({4}, DType::Float32, kSim0);
  Stream a;
  twice.copy_from(kValues);
  Stream b;
  DropWait drop("copy");
  EXPECT_EQ(error_of([&] { twice.copy_from(kValues); }),
            race(kUpload, b, "writes", kUpload, a.name(), "wrote"));
  backend_for(kSim0).synchronize(kSim0);  // before the tensors are freed
}

TEST(SimStreams, WorkOnOneStreamIsOrderedWithoutWaiting) {
  Tensor t = Tensor::empty({4}, DType::Float32, kSim0);
  Tensor u = Tensor::empty({4}, DType::Float32, kSim0);
  Stream a;
  t.copy_from(kValues);
  u.copy_from(t);
  t.copy_from(u);
  EXPECT_EQ(host_values(t), (std::vector<float>{1, 2, 3, 4}));
}

// Each way the host waits for a stream's work on a GPU: after it, another stream may use it.
TEST(SimStreams, EveryWayOfWaitingOrdersTheWorkBeforeOtherStreams) {
  const std::vector<std::pair<std::string, std::function<void(Stream&, Tensor&)>>> waits = {
      {"the context synchronizes", [](Stream& a, Tensor&) { a.context->synchronize(); }},
      {"the device synchronizes", [](Stream&, Tensor&) { backend_for(kSim0).synchronize(kSim0); }},
      {"a copy to the host", [](Stream&, Tensor& t) { (void)t.to(Device::cpu()); }},
      {"a collective", [](Stream&, Tensor& t) {
         (void)broadcast_coalesced({t}, {kSim0, Device::sim(1)});
       }}};
  for (const auto& [way, wait] : waits) {
    SCOPED_TRACE(way);
    Tensor t = Tensor::empty({4}, DType::Float32, kSim0);
    Tensor u = Tensor::empty({4}, DType::Float32, kSim0);
    Stream a;
    t.copy_from(kValues);
    wait(a, t);
    Stream b;
    EXPECT_EQ(error_of([&] { u.copy_from(t); }), "no error");
    backend_for(kSim0).synchronize(kSim0);
  }
}

TEST(SimStreams, WorkWithoutAContextIsWaitedForAtOnce) {
  Tensor t = Tensor::empty({4}, DType::Float32, kSim0);
  t.copy_from(kValues);  // on the default stream, which the CUDA backend's copies wait for
  Stream b;
  Tensor u = Tensor::empty({4}, DType::Float32, kSim0);
  EXPECT_EQ(error_of([&] { u.copy_from(t); }), "no error");
  backend_for(kSim0).synchronize(kSim0);
}

TEST(SimStreams, ACollectiveFollowsTheCallersCurrentStreamsAndNoOther) {
  Tensor source = Tensor::empty({4}, DType::Float32, kSim0);
  Stream a;
  source.copy_from(kValues);
  // NCCL's streams wait for the calling thread's current stream of each device: here a.
  std::vector<std::vector<Tensor>> copies = broadcast_coalesced({source}, {kSim0, Device::sim(1)});
  EXPECT_EQ(host_values(copies[1][0]), (std::vector<float>{1, 2, 3, 4}));
  source.copy_from(kValues);
  Stream b;
  DropWait drop("collective");
  EXPECT_EQ(error_of([&] {
              broadcast_coalesced({source}, {kSim0, Device::sim(1)});
            }),
            race("a broadcast over sim devices", b, "reads", kUpload, a.name(), "wrote"));
  Tensor sum = Tensor::empty({4}, DType::Float32, kSim0);
  EXPECT_EQ(error_of([&] {
              backend_for(kSim0).reduce_add_coalesced({{source}, {copies[1][0]}}, {sum});
            }),
            race("a reduce over sim devices", b, "reads", kUpload, a.name(), "wrote"));
  backend_for(kSim0).synchronize(kSim0);
}

// A kernel of a simulated device (ops/sim), run on `stream` over `input`.
std::string run_kernel(const char* op, const Stream& stream, const Tensor& input,
                       std::vector<Tensor>& outputs) {
  Node node = testing::make_node(op, {"x"}, {"y"});
  node.name = "the_node";
  KernelInfo info{.node = node,
                  .opset = 17,
                  .device_type = DeviceType::Sim,
                  .input_types = {TensorType{DType::Float32, std::nullopt}}};
  std::unique_ptr<OpKernel> kernel = KernelRegistry::instance().create(info);
  if (!kernel) return "no kernel";
  const Tensor* inputs[] = {&input};
  KernelContext ctx(node, *stream.context, inputs, outputs);
  return error_of([&] { kernel->compute(ctx); });
}

TEST(SimStreams, AKernelReadsItsInputsAndWritesItsOutputsOnItsContextsStream) {
  Tensor x = Tensor::empty({2, 2}, DType::Float32, kSim0);
  std::vector<Tensor> outputs(1);
  Stream a;
  x.copy_from(kValues);
  Stream b;
  const std::string refused = run_kernel("Relu", b, x, outputs);
  EXPECT_EQ(refused, race("Relu kernel ('the_node')", b, "reads", kUpload, a.name(), "wrote"));
  a.context->synchronize();
  ASSERT_EQ(run_kernel("Relu", b, x, outputs), "no error");
  // The output is b's until b is waited for.
  Stream c;
  Tensor copy = Tensor::empty({2, 2}, DType::Float32, kSim0);
  EXPECT_EQ(error_of([&] { copy.copy_from(outputs[0]); }),
            race(kOnDevice, c, "reads", "Relu kernel ('the_node')", b.name(), "wrote"));
  backend_for(kSim0).synchronize(kSim0);
}

TEST(SimStreams, AViewWritesNothing) {
  Tensor x = kValues.to(kSim0);
  Tensor copy = Tensor::empty({4}, DType::Float32, kSim0);
  Stream a;
  copy.copy_from(x);  // a reads x
  Stream b;
  std::vector<Tensor> outputs(1);
  const std::string result = run_kernel("Flatten", b, x.reshape({2, 2}), outputs);
  EXPECT_EQ(result, "no error");
  backend_for(kSim0).synchronize(kSim0);
}

TEST(SimStreamsDeathTest, FreeingMemoryThatAnotherStreamStillUsesStopsTheProcess) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        DropWait drop("record_stream");  // the copy's record_stream would order the reuse
        Tensor t = kValues.to(kSim0);    // belongs to the default stream
        Tensor u = Tensor::empty({4}, DType::Float32, kSim0);
        {
          Stream a;
          u.copy_from(t);  // a reads t and is not waited for
        }
        t = Tensor();  // freed with no context current: reusable at once on a GPU
      },
      "dprun: sim:0: memory freed on the default stream of sim:0 while a copy of 16 bytes from "
      "sim:0 to sim:0 on stream [0-9]+ of sim:0 may still use it \\(the host has not waited for "
      "that stream\\): a GPU's allocator could hand it to other work first");
}

TEST(SimStreams, FreeingMemoryOnTheStreamThatUsesItOrAfterWaitingForItIsAllowed) {
  Tensor t = kValues.to(kSim0);
  Tensor u = Tensor::empty({4}, DType::Float32, kSim0);
  {
    Stream a;
    u.copy_from(t);
    t = Tensor();  // freed on the stream that reads it: reused after its work
    a.context->synchronize();
  }
  Tensor v = kValues.to(kSim0);
  {
    Stream a;
    u.copy_from(v);
    a.context->synchronize();
  }
  v = Tensor();
  EXPECT_EQ(host_values(u), (std::vector<float>{1, 2, 3, 4}));
}

// y = Relu(x) on the device, then a Reshape of y to [5], which fails for any other size.
std::shared_ptr<Graph> fails_after_device_work() {
  using testing::make_node;
  auto g = testing::make_graph(
      {make_node("Relu", {"x"}, {"y"}), make_node("Reshape", {"y", "five"}, {"z"})},
      {{"x", DType::Float32}}, {"z"});
  g->opset_imports[""] = 17;
  g->initializers["five"] = testing::int64_vector({5});
  return g;
}

constexpr char kReshapeError[] =
    "[Reshape] node 'Reshape_1': cannot reshape [4] (4 elements) to [5]";

// A failed run's queued work may still read its inputs, which the caller frees as the error
// reaches it: the run waits for its work first. The process exits 0 unless freeing the inputs
// stops it (SimMemory) or the error is not the Reshape's.
// Runs the graph above on sim:0 and data-parallel on sim:0 and sim:1, then exits: 0 when both
// failed with the Reshape's error, 2 or 3 when one failed otherwise.
[[noreturn]] void run_failing_models_and_exit() {
  Model model(fails_after_device_work(), kSim0);
  std::string error = error_of([&] { model.run({kValues.to(kSim0)}); });
  if (error != kReshapeError) {
    std::fprintf(stderr, "%s\n", error.c_str());
    std::_Exit(2);
  }
  DataParallelOptions options;
  options.device_ids = {kSim0, Device::sim(1)};
  DataParallel dp(std::make_shared<Model>(fails_after_device_work(), kSim0), options);
  const Tensor rows = Tensor::from_vector<float>({2, 4}, {1, 2, 3, 4, 5, 6, 7, 8});
  error = error_of([&] { dp.forward({rows}); });
  if (error !=
      "2 of 2 replicas failed: replica 0 on sim:0: [Reshape] node 'Reshape_1': cannot "
      "reshape [1, 4] (4 elements) to [5]; replica 1 on sim:1: [Reshape] node "
      "'Reshape_1': cannot reshape [1, 4] (4 elements) to [5]") {
    std::fprintf(stderr, "%s\n", error.c_str());
    std::_Exit(3);
  }
  std::_Exit(0);
}

TEST(SimStreamsDeathTest, AFailedRunWaitsForItsWorkBeforeItsInputsCanBeFreed) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(run_failing_models_and_exit(), ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace dprun
