// The CPU backend through the Backend interface: execution contexts (thread counts, the
// intra-op loop, the thread's OpenMP setting restored, the context a run's kernels see),
// device capacities, and the channels-last rewrite as the backend's graph pass.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "engine/backend.h"
#include "engine/backends/cpu/cpu_cores.h"
#include "engine/backends/cpu/layout_rewrite.h"
#include "engine/error.h"
#include "engine/kernel.h"
#include "engine/model.h"
#include "engine/rewrites/device_rewrites.h"

namespace dprun {
namespace {

Backend& cpu() {
  return backend_for(DeviceType::CPU);
}

/// Outputs the intra-op threads its context offers and whether that context is `expected`.
class ContextProbe : public OpKernel {
 public:
  static inline const ExecutionContext* expected = nullptr;
  explicit ContextProbe(const KernelInfo&) {}
  void compute(KernelContext& ctx) const override {
    ctx.allocate_output(0, {}, DType::Int64).data<int64_t>()[0] = ctx.threads();
    ctx.allocate_output(1, {}, DType::Bool).data<bool>()[0] = &ctx.execution() == expected;
  }
};
DPRUN_REGISTER_KERNEL({.domain = "dprun.test",
                       .op_type = "ContextProbe",
                       .factory = make_kernel<ContextProbe>});

std::shared_ptr<Graph> probe_graph() {
  auto g = std::make_shared<Graph>();
  g->name = "probe";
  g->opset_imports[""] = 13;
  g->opset_imports["dprun.test"] = 1;
  g->inputs.push_back({"x", {DType::Float32, std::nullopt}});
  Node n;
  n.name = "probe";
  n.domain = "dprun.test";
  n.op_type = "ContextProbe";
  n.inputs = {"x"};
  n.outputs = {"threads", "same"};
  g->nodes.push_back(n);
  g->outputs.push_back({"threads", {DType::Int64, std::nullopt}});
  g->outputs.push_back({"same", {DType::Bool, std::nullopt}});
  return g;
}

TEST(CpuCores, ADeviceIndexPastTheCountWrapsToAShareOfTheCores) {
  const int cores = available_cores();
  for (int count = 1; count <= cores; ++count)
    for (int index = 0; index < 3 * count; ++index) {
      const std::vector<int> share = cpu_core_share(index, count);
      ASSERT_FALSE(share.empty()) << index << " of " << count;
      EXPECT_EQ(share, cpu_core_share(index % count, count)) << index << " of " << count;
    }
}

TEST(CpuExecutionContext, ThreadsFollowTheConfig) {
  auto context = cpu().create_execution_context(Device::cpu(2), {.threads = 3});
  EXPECT_EQ(context->device(), Device::cpu(2));
  EXPECT_EQ(context->threads(), 3);
}

TEST(CpuExecutionContext, InADeviceSetThreadsDefaultToTheCoreShare) {
  // Run on a thread of its own: a context in a device set pins its thread.
  const int cores = cpu().device_count();
  std::vector<int> threads;
  std::thread worker([&] {
    threads.push_back(
        cpu().create_execution_context(Device::cpu(0), {.device_count = 1})->threads());
    threads.push_back(
        cpu().create_execution_context(Device::cpu(0), {.device_count = cores + 1})->threads());
    threads.push_back(
        cpu()
            .create_execution_context(Device::cpu(0), {.threads = 2, .device_count = cores + 1})
            ->threads());
  });
  worker.join();
  EXPECT_EQ(threads, (std::vector<int>{cores, 1, 2}));
}

TEST(CpuExecutionContext, SetsAndRestoresTheThreadsOpenMpCount) {
  omp_set_num_threads(5);
  {
    auto context = cpu().create_execution_context(Device::cpu(0), {.threads = 1});
    EXPECT_EQ(omp_get_max_threads(), 1);  // oneDNN follows the calling thread's setting
    auto inherit = cpu().create_execution_context(Device::cpu(0), {});
    EXPECT_EQ(inherit->threads(), 1);
  }
  EXPECT_EQ(omp_get_max_threads(), 5);
}

TEST(CpuExecutionContext, ParallelForPartitionsTheRangeInOrder) {
  auto context = cpu().create_execution_context(Device::cpu(0), {.threads = 4});
  std::mutex mutex;
  std::vector<std::pair<int64_t, int64_t>> chunks;
  context->parallel_for(1000, 10, [&](int64_t begin, int64_t end) {
    std::lock_guard lock(mutex);
    chunks.emplace_back(begin, end);
  });
  std::sort(chunks.begin(), chunks.end());
  EXPECT_EQ(chunks, (std::vector<std::pair<int64_t, int64_t>>{
                        {0, 250}, {250, 500}, {500, 750}, {750, 1000}}));
  chunks.clear();
  context->parallel_for(25, 10, [&](int64_t begin, int64_t end) {
    std::lock_guard lock(mutex);
    chunks.emplace_back(begin, end);
  });
  std::sort(chunks.begin(), chunks.end());  // ceil(25 / 10) = 3 chunks at most
  EXPECT_EQ(chunks, (std::vector<std::pair<int64_t, int64_t>>{{0, 8}, {8, 16}, {16, 25}}));
  chunks.clear();
  context->parallel_for(0, 1, [&](int64_t begin, int64_t end) { chunks.emplace_back(begin, end); });
  EXPECT_TRUE(chunks.empty());
}

TEST(CpuExecutionContext, ParallelForFinishesEveryChunkThenRethrows) {
  auto context = cpu().create_execution_context(Device::cpu(0), {.threads = 4});
  std::atomic<int> ran{0};
  try {
    context->parallel_for(400, 1, [&](int64_t begin, int64_t) {
      ++ran;
      if (begin == 100) fail("chunk at ", begin);
    });
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "chunk at 100");
  }
  EXPECT_EQ(ran.load(), 4);
}

TEST(CpuExecutionContext, RunOnOneThreadTurnsParallelismOffAndRestoresIt) {
  auto context = cpu().create_execution_context(Device::cpu(0), {.threads = 3});
  std::vector<std::pair<int64_t, int64_t>> chunks;
  context->run_on_one_thread([&] {
    EXPECT_EQ(context->threads(), 1);
    EXPECT_EQ(omp_get_max_threads(), 1);  // what oneDNN primitives created here see
    context->parallel_for(900, 1, [&](int64_t begin, int64_t end) {
      chunks.emplace_back(begin, end);  // no lock: it must run on this thread alone
    });
  });
  EXPECT_EQ(chunks, (std::vector<std::pair<int64_t, int64_t>>{{0, 900}}));
  EXPECT_EQ(context->threads(), 3);
  EXPECT_EQ(omp_get_max_threads(), 3);
  try {
    context->run_on_one_thread([] { fail("inside"); });
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "inside");
  }
  EXPECT_EQ(context->threads(), 3);
  EXPECT_EQ(omp_get_max_threads(), 3);
}

TEST(CpuExecutionContext, KernelsSeeTheRunsContext) {
  Model model(probe_graph(), Device::cpu(0));
  Tensor x = Tensor::zeros({1}, DType::Float32);
  RunOptions options;
  options.threads = 3;  // the executor makes the context
  auto out = model.run({x}, options);
  EXPECT_EQ(out[0].data<int64_t>()[0], 3);
  EXPECT_FALSE(out[1].data<bool>()[0]);

  auto context = cpu().create_execution_context(Device::cpu(0), {.threads = 2});
  ContextProbe::expected = context.get();
  options.context = context.get();  // the caller's context wins over `threads`
  out = model.run({x}, options);
  ContextProbe::expected = nullptr;
  EXPECT_EQ(out[0].data<int64_t>()[0], 2);
  EXPECT_TRUE(out[1].data<bool>()[0]);

  auto other = cpu().create_execution_context(Device::cpu(1), {});
  options.context = other.get();
  try {
    model.run({x}, options);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "an execution context of cpu:1 cannot run a plan on cpu:0");
  }
}

TEST(CpuBackend, CapacityIsTheCoreShare) {
  const int cores = cpu().device_count();
  DeviceProperties whole = cpu().properties(Device::cpu(0), 1);
  EXPECT_EQ(whole.name, "cpu:0");
  EXPECT_EQ(whole.compute_units, cores);
  EXPECT_EQ(whole.total_memory, 0u);
  EXPECT_EQ(cpu().properties(Device::cpu(3), cores + 1).compute_units, 1);
  EXPECT_THROW(cpu().properties(Device::cpu(-1), 1), Error);
}

std::shared_ptr<Graph> conv_graph() {
  auto g = std::make_shared<Graph>();
  g->name = "conv";
  g->opset_imports[""] = 13;
  g->inputs.push_back({"x",
                       {DType::Float32, SymbolicShape{Dim::known(1), Dim::known(2), Dim::known(5),
                                                      Dim::known(5)}}});
  g->initializers["w"] = Tensor::zeros({3, 2, 3, 3}, DType::Float32);
  Node conv;
  conv.name = "conv";
  conv.op_type = "Conv";
  conv.inputs = {"x", "w"};
  conv.outputs = {"y"};
  g->nodes.push_back(conv);
  g->outputs.push_back({"y", {DType::Float32, std::nullopt}});
  return g;
}

TEST(CpuBackend, GraphRewriteIsTheChannelsLastPass) {
  std::shared_ptr<const Graph> graph = conv_graph();
  std::shared_ptr<const Graph> rewritten = rewrite_for_device(cpu(), graph, {.layout = true});
  ASSERT_NE(rewritten, graph);
  int nhwc = 0;
  for (const Node& n : rewritten->nodes) nhwc += n.domain == kRewriteDomain;
  EXPECT_EQ(nhwc, 1);
  EXPECT_EQ(rewrite_for_device(cpu(), graph, {.layout = false}), graph);
  std::shared_ptr<const Graph> probe = probe_graph();  // nothing qualifies: used as it is
  EXPECT_EQ(rewrite_for_device(cpu(), probe, {.layout = true}), probe);
}

}  // namespace
}  // namespace dprun
