// Steady-state runs as captured graphs (engine/plan_graphs.h, DPRUN_CUDA_GRAPHS=1) on every
// accelerator: the simulated devices here, CUDA GPUs where one is present. The second run of a
// key captures, later ones replay, and every run gives the plain run's outputs bit for bit;
// plans that cannot be captured fall back once, with the plain result. On the simulated devices
// the capture rules are checked (engine/backends/sim/sim_capture.h), and switches that drop a
// part of the replay show that each part is needed.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "accelerator_test_util.h"
#include "bundled_model_util.h"
#include "engine/backend.h"
#include "engine/model.h"
#include "engine/parallel/data_parallel.h"
#include "engine/stream_capture.h"
#include "engine/training/trainer.h"
#include "error_test_util.h"
#include "graph_test_util.h"
#include "loader/onnx_loader.h"
#include "sim_drop_wait_util.h"

namespace dprun {
namespace {

using testing::error_of;
using ::testing::HasSubstr;

/// Sets an environment variable for its lifetime, then restores it.
class Env {
 public:
  Env(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) previous_ = old;
    setenv(name, value, 1);
  }
  ~Env() {
    if (previous_)
      setenv(name_, previous_->c_str(), 1);
    else
      unsetenv(name_);
  }
  Env(const Env&) = delete;
  Env& operator=(const Env&) = delete;

 private:
  const char* name_;
  std::optional<std::string> previous_;
};

/// DPRUN_CUDA_GRAPHS=1 for its lifetime.
struct GraphsOn : Env {
  GraphsOn() : Env("DPRUN_CUDA_GRAPHS", "1") {}
};

// The bytes of `t`, read on the host.
std::vector<unsigned char> bytes_of(const Tensor& t) {
  Tensor host = t.to(Device::cpu());
  const auto* p = static_cast<const unsigned char*>(host.raw_data());
  return {p, p + host.nbytes()};
}

void expect_same_bits(const std::vector<Tensor>& got, const std::vector<Tensor>& want,
                      const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t o = 0; o < want.size(); ++o) {
    EXPECT_EQ(got[o].shape(), want[o].shape()) << what << ", output " << o;
    EXPECT_TRUE(bytes_of(got[o]) == bytes_of(want[o])) << what << ", output " << o;
  }
}

// `inputs` with other values, same dtypes and shapes: variant k.
std::vector<Tensor> variant(const std::vector<Tensor>& inputs, int k) {
  std::vector<Tensor> out;
  for (const Tensor& t : inputs) {
    Tensor v = t.clone();
    for (int64_t i = 0; i < v.numel(); ++i) {
      if (v.dtype() == DType::Float32) v.data<float>()[i] *= 1.0f + 0.25f * static_cast<float>(k);
      if (v.dtype() == DType::Int64) v.data<int64_t>()[i] = (v.data<int64_t>()[i] + 7 * k) % 1000;
    }
    out.push_back(v);
  }
  return out;
}

void expect_stats(const GraphStats& s, int64_t captures, int64_t replays, int64_t fallbacks,
                  const std::string& what) {
  EXPECT_EQ(s.captures, captures) << what;
  EXPECT_EQ(s.replays, replays) << what;
  EXPECT_EQ(s.fallbacks, fallbacks) << what << ": " << s.last_fallback;
}

using CudaGraphs = testing::AcceleratorTest;

TEST_P(CudaGraphs, TheBundledModelsCaptureOnTheSecondRunAndReplayThePlainRunsBitForBit) {
  for (const char* name : {"mlp", "cnn", "transformer"}) {
    SCOPED_TRACE(name);
    const Model plain(load_model(testing::bundled_model_path(name), device()));
    const std::vector<Tensor> base = testing::deterministic_inputs(plain, 2);
    GraphsOn on;
    const Model graphed(load_model(testing::bundled_model_path(name), device()));
    for (int run = 0; run < 4; ++run) {
      const std::vector<Tensor> inputs = variant(base, run);
      std::vector<Tensor> want;
      {
        Env off("DPRUN_CUDA_GRAPHS", "0");
        want = plain.run(inputs);
      }
      expect_same_bits(graphed.run(inputs), want, "run " + std::to_string(run));
      expect_stats(graphed.graph_stats(), run >= 1 ? 1 : 0, run >= 2 ? run - 1 : 0, 0,
                   "after run " + std::to_string(run));
    }
  }
}

TEST_P(CudaGraphs, AnotherInputShapeCapturesAnotherGraph) {
  GraphsOn on;
  const Model model(testing::small_mlp_graph(false), device());
  const Tensor two = testing::random_floats({2, 4}, 5), three = testing::random_floats({3, 4}, 6);
  for (int run = 0; run < 2; ++run) model.run({two});
  expect_stats(model.graph_stats(), 1, 0, 0, "batch 2 twice");
  for (int run = 0; run < 2; ++run) model.run({three});
  expect_stats(model.graph_stats(), 2, 0, 0, "then batch 3 twice");
  const std::vector<Tensor> got = model.run({two});
  expect_stats(model.graph_stats(), 2, 1, 0, "then batch 2 again");
  Env off("DPRUN_CUDA_GRAPHS", "0");
  expect_same_bits(got, model.run({two}), "batch 2 replayed");
}

// y = NonZero(Relu(x)): NonZero has no device kernel, so the run copies Relu's output to the
// host, which waits for the device: no graph can hold that.
std::shared_ptr<Graph> host_wait_graph() {
  auto g = testing::make_graph(
      {testing::make_node("Relu", {"x"}, {"r"}), testing::make_node("NonZero", {"r"}, {"y"})},
      {{"x", DType::Float32}}, {"y"});
  g->nodes[0].name = "relu";
  g->nodes[1].name = "nonzero";
  g->opset_imports[""] = 17;
  return g;
}

TEST_P(CudaGraphs, APlanThatMakesTheHostWaitFallsBackOnceAndGivesThePlainResult) {
  GraphsOn on;
  const Model model(host_wait_graph(), device());
  const Tensor x = Tensor::from_vector<float>({2, 3}, {-1, 2, 0, 4, -5, 6});
  for (int run = 0; run < 4; ++run) {
    const Tensor y = model.run({x})[0].to(Device::cpu());
    ASSERT_EQ(y.shape(), (Shape{2, 3})) << "run " << run;
    EXPECT_EQ(std::vector<int64_t>(y.data<int64_t>(), y.data<int64_t>() + 6),
              (std::vector<int64_t>{0, 1, 1, 1, 0, 2}))
        << "run " << run;
  }
  const GraphStats stats = model.graph_stats();
  expect_stats(stats, 0, 0, 1, "four runs");
  if (GetParam() == DeviceType::Sim) {
    EXPECT_THAT(stats.last_fallback,
                ::testing::AllOf(HasSubstr("[NonZero] node 'nonzero'"),
                                 HasSubstr("the host waits for stream"),
                                 HasSubstr("which captures a graph: a graph cannot make the host "
                                           "wait")));
  }
}

TEST_P(CudaGraphs, RunsWithoutTheSwitchAreNeverCaptured) {
  const Model model(testing::small_mlp_graph(false), device());
  const Tensor x = testing::random_floats({2, 4}, 5);
  for (int run = 0; run < 3; ++run) model.run({x});
  expect_stats(model.graph_stats(), 0, 0, 0, "three runs without DPRUN_CUDA_GRAPHS");
}

TEST_P(CudaGraphs, DataParallelReplicasReplayTheirGraphs) {
  const auto graph = testing::small_mlp_graph(true);
  const Tensor x = testing::random_floats({6, 4}, 8);
  DataParallelOptions options;
  options.device_ids = devices();
  options.summed_outputs = {"total"};
  DataParallel plain(std::make_shared<Model>(graph, devices()[0]), options);
  const std::vector<Tensor> want = plain.forward({x});
  GraphsOn on;
  DataParallel graphed(std::make_shared<Model>(graph, devices()[0]), options);
  for (int call = 0; call < 4; ++call)
    expect_same_bits(graphed.forward({x}), want, "call " + std::to_string(call));
}

// Six SGD steps of the small MLP on one device; the losses and the trained parameters.
struct Trained {
  std::vector<double> losses;
  std::vector<Tensor> parameters;
  GraphStats stats;
};

Trained train(Device device) {
  const Tensor x = testing::random_floats({8, 4}, 6), t = testing::random_floats({8, 3}, 7);
  auto model = std::make_shared<Model>(testing::small_mlp_graph(false), device);
  TrainerOptions options;
  options.training.loss.kind = LossKind::Mse;
  options.parallel.device_ids = {device};
  Trainer trainer(model, options);
  Sgd sgd(trainer.parameters(), {.lr = 0.05, .momentum = 0.9});
  Trained out;
  for (int s = 0; s < 6; ++s) out.losses.push_back(trainer.step({x}, t, sgd));
  for (const Tensor& p : trainer.parameters()) out.parameters.push_back(p.to(Device::cpu()));
  out.stats = trainer.training_model().graph_stats();
  return out;
}

// The step's graph reads the parameters where the optimizer updates them in place: the key
// (their addresses) repeats, and each replay computes with the values of its step.
TEST_P(CudaGraphs, TrainingStepsReplayAndGiveThePlainLossesBitForBit) {
  const Trained want = train(device());
  GraphsOn on;
  const Trained got = train(device());
  EXPECT_EQ(got.losses, want.losses);
  expect_same_bits(got.parameters, want.parameters, "trained parameters");
  expect_stats(got.stats, 1, 4, 0, "six steps: a warm-up, a capture, four replays");
}

DPRUN_ON_ACCELERATORS(CudaGraphs);

// The simulated devices check the capture rules and the replay's assumptions.

const Device kSim0 = Device::sim(0);

// A capture on a context's stream of sim:0 with `work` inside; what end() says.
template <class Work>
std::string capture_error(Work&& work) {
  StreamCapture& capture = *stream_capture_for(DeviceType::Sim);
  auto context = backend_for(kSim0).create_execution_context(kSim0, {});
  capture.begin(kSim0);
  const std::string inside = error_of([&] { work(*context); });
  const std::string ended = error_of([&] { capture.end(kSim0); });
  EXPECT_EQ(inside, ended) << "the first rule broken is what end() reports";
  return ended;
}

TEST(SimCapture, AHostWaitInsideACaptureFailsItNamingTheRule) {
  const std::string error = capture_error([](ExecutionContext& c) { c.synchronize(); });
  EXPECT_THAT(error,
              ::testing::MatchesRegex("the host waits for stream [0-9]+ of sim:0, which "
                                      "captures a graph: a graph cannot make the host wait.*"));
  EXPECT_THAT(capture_error([](ExecutionContext&) { backend_for(kSim0).synchronize(kSim0); }),
              HasSubstr("the host waits for every stream of sim:0 while stream"));
}

TEST(SimCapture, ACopyToTheHostInsideACaptureFailsIt) {
  const Tensor x = testing::random_floats({4}, 1).to(kSim0);
  backend_for(kSim0).synchronize(kSim0);
  EXPECT_THAT(capture_error([&](ExecutionContext&) { x.to(Device::cpu()); }),
              HasSubstr("the host waits for stream"));
}

TEST(SimCapture, ACopyFromHostMemoryTheCaptureDoesNotKeepFailsIt) {
  const std::vector<float> host(4, 1.0f);
  EXPECT_THAT(capture_error([&](ExecutionContext&) {
                Tensor t = Tensor::empty({4}, DType::Float32, kSim0);
                copy_bytes(t.raw_data(), kSim0, host.data(), Device::cpu(), 16);
              }),
              HasSubstr("a copy from host memory to sim:0 on stream"));
  // A tensor's copy: the graph keeps the host memory, and replays copy from it.
  const Tensor x = testing::random_floats({4}, 1);
  EXPECT_EQ(capture_error([&](ExecutionContext&) { x.to(kSim0); }), "no error");
}

TEST(SimCapture, AnAllocationOffTheGraphsPoolFailsIt) {
  // Another context made on the capturing thread: its stream is not the capture's.
  const std::string error = capture_error([](ExecutionContext&) {
    auto other = backend_for(kSim0).create_execution_context(kSim0, {});
    Tensor::empty({16}, DType::Float32, kSim0);
  });
  EXPECT_THAT(error,
              ::testing::MatchesRegex("an allocation on stream [0-9]+ of sim:0 while stream "
                                      "[0-9]+ of sim:0 captures a graph on this thread: "
                                      "memory a graph uses must come from its private pool"));
}

TEST(SimCapture, TheDeviceIsUsableAfterAFailedCapture) {
  capture_error([](ExecutionContext& c) { c.synchronize(); });
  const Model model(testing::small_mlp_graph(false), kSim0);
  const Tensor x = testing::random_floats({2, 4}, 5);
  EXPECT_EQ(bytes_of(model.run({x})[0]), bytes_of(model.run({x})[0]));
  EXPECT_FALSE(stream_capturing(kSim0));
}

// Runs the small MLP four times on variants of one input with graphs on; whether each run gave
// the plain run's outputs.
std::vector<bool> replays_match() {
  const Model plain(testing::small_mlp_graph(false), kSim0);
  GraphsOn on;
  const Model graphed(testing::small_mlp_graph(false), kSim0);
  const std::vector<Tensor> base = {testing::random_floats({2, 4}, 5)};
  std::vector<bool> match;
  for (int run = 0; run < 4; ++run) {
    std::vector<Tensor> want;
    {
      Env off("DPRUN_CUDA_GRAPHS", "0");
      want = plain.run(variant(base, run));
    }
    match.push_back(bytes_of(graphed.run(variant(base, run))[0]) == bytes_of(want[0]));
  }
  return match;
}

TEST(SimCapture, AReplayNeedsTheFeedsCopiedIntoItsStaticInputs) {
  {
    Env drop("DPRUN_CUDA_GRAPHS_DROP", "inputs");
    EXPECT_EQ(replays_match(), (std::vector<bool>{true, true, false, false}));
  }
  EXPECT_EQ(replays_match(), (std::vector<bool>{true, true, true, true}));
}

TEST(SimCapture, AReplayNeedsTheAddressesItsCaptureGot) {
  {
    testing::DropWait drop("graph_pool");  // replays get fresh memory, not the pool's
    EXPECT_EQ(replays_match(), (std::vector<bool>{true, true, false, false}));
  }
  EXPECT_EQ(replays_match(), (std::vector<bool>{true, true, true, true}));
}

TEST(SimCapture, AReplayWaitsForThePreviousUseOfTheGraphsBuffers) {
  GraphsOn on;
  const Model model(testing::small_mlp_graph(false), kSim0);
  const Tensor x = testing::random_floats({2, 4}, 5).to(kSim0);
  backend_for(kSim0).synchronize(kSim0);
  model.run({x});
  model.run({x});  // captures, on a stream of its own
  {
    testing::DropWait drop("handover");
    EXPECT_THAT(error_of([&] { model.run({x}); }),
                HasSubstr("and the host has not waited for that stream since: the two race"));
  }
  backend_for(kSim0).synchronize(kSim0);
  EXPECT_EQ(error_of([&] { model.run({x}); }), "no error");
}

}  // namespace
}  // namespace dprun
