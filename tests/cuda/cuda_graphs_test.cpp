// CUDA graphs on a GPU (engine/plan_graphs.h, DPRUN_CUDA_GRAPHS=1; the device-neutral tests,
// which run on the simulated devices everywhere, are tests/unit/cuda_graphs_test.cpp): what only
// a real capture shows. The graph's private pool keeps its blocks from other allocations, a
// synchronisation inside a capture is refused by CUDA and leaves the GPU usable, and many replays
// of the bundled CNN on fresh inputs give the plain runs' outputs bit for bit.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

#include "cuda_test_util.h"
#include "engine/backend.h"
#include "engine/model.h"
#include "engine/stream_capture.h"
#include "error_test_util.h"
#include "graph_test_util.h"
#include "loader/onnx_loader.h"
#include "source_dir.h"

namespace dprun {
namespace {

const Device kGpu = Device::cuda(0);

std::string cnn_path() {
  return testing::cuda_test_source_dir() + "/models/cnn.onnx";
}

bool same_bits(const Tensor& a, const Tensor& b) {
  const Tensor x = a.to(Device::cpu()), y = b.to(Device::cpu());
  return x.shape() == y.shape() && std::memcmp(x.raw_data(), y.raw_data(), x.nbytes()) == 0;
}

TEST(CudaGraphsOnAGpu, ReplaysOfTheBundledCnnGiveThePlainRunsBitForBit) {
  DPRUN_REQUIRE_CUDA_GPU();
  const Model plain(load_model(cnn_path(), kGpu));
  setenv("DPRUN_CUDA_GRAPHS", "1", 1);
  const Model graphed(load_model(cnn_path(), kGpu));
  for (int run = 0; run < 12; ++run) {
    Shape shape = {4};
    for (size_t d = 1; d < graphed.input_types()[0].shape->size(); ++d)
      shape.push_back((*graphed.input_types()[0].shape)[d].value);
    const std::vector<Tensor> inputs = {testing::random_floats(shape, 100 + run)};
    const std::vector<Tensor> got = graphed.run(inputs);
    setenv("DPRUN_CUDA_GRAPHS", "0", 1);
    const std::vector<Tensor> want = plain.run(inputs);
    setenv("DPRUN_CUDA_GRAPHS", "1", 1);
    ASSERT_TRUE(same_bits(got[0], want[0])) << "run " << run;
  }
  unsetenv("DPRUN_CUDA_GRAPHS");
  const GraphStats stats = graphed.graph_stats();
  EXPECT_EQ(stats.captures, 1) << stats.last_fallback;
  EXPECT_EQ(stats.replays, 10);
  EXPECT_EQ(stats.fallbacks, 0);
}

TEST(CudaGraphsOnAGpu, AllocationsInsideACaptureComeFromItsPoolAndStayThere) {
  DPRUN_REQUIRE_CUDA_GPU();
  StreamCapture& capture = *stream_capture_for(DeviceType::CUDA);
  auto context = backend_for(kGpu).create_execution_context(kGpu, {});
  const void* pooled = nullptr;
  capture.begin(kGpu);
  EXPECT_TRUE(stream_capturing(kGpu));
  {
    Tensor t = Tensor::empty({1024}, DType::Float32, kGpu);
    pooled = t.raw_data();
  }  // freed into the graph's pool
  std::unique_ptr<CapturedGraph> graph = capture.end(kGpu);
  EXPECT_FALSE(stream_capturing(kGpu));
  // The same size on the same stream outside the capture: not the pool's block.
  Tensor outside = Tensor::empty({1024}, DType::Float32, kGpu);
  EXPECT_NE(outside.raw_data(), pooled);
  graph->replay({});  // an empty graph
  context->synchronize();
}

TEST(CudaGraphsOnAGpu, ASynchronizeInsideACaptureFailsItAndTheGpuStaysUsable) {
  DPRUN_REQUIRE_CUDA_GPU();
  StreamCapture& capture = *stream_capture_for(DeviceType::CUDA);
  {
    auto context = backend_for(kGpu).create_execution_context(kGpu, {});
    capture.begin(kGpu);
    EXPECT_NE(testing::error_of([&] { context->synchronize(); }), "no error");
    EXPECT_NE(testing::error_of([&] { capture.end(kGpu); }), "no error");
    capture.abort(kGpu);
  }
  const Model model(testing::small_mlp_graph(false), kGpu);
  const Tensor x = testing::random_floats({2, 4}, 5);
  EXPECT_TRUE(same_bits(model.run({x})[0], model.run({x})[0]));
}

}  // namespace
}  // namespace dprun
