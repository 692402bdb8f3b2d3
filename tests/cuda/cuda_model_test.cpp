// Models on a GPU: a kernel registered for DeviceType::CUDA runs on its run's stream, inputs
// and outputs move between host and GPU, and DataParallel spreads over every GPU. The tests of
// host fallbacks, strings and sequences that run on every accelerator are in
// tests/unit/accelerator_model_test.cpp.
#include <gtest/gtest.h>

#include "cuda/cuda_test_kernels.h"
#include "cuda_test_util.h"
#include "engine/model.h"
#include "engine/parallel/data_parallel.h"
#include "engine/parallel/device_list.h"
#include "engine/plan.h"
#include "graph_test_util.h"

namespace dprun {
namespace {

Tensor rows(int64_t n, int64_t width) {
  Tensor t = Tensor::empty({n, width}, DType::Float32);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = static_cast<float>(i) * 0.5f;
  return t;
}

void expect_plus_one(const Tensor& got, const Tensor& x) {
  ASSERT_EQ(got.shape(), x.shape());
  Tensor host = got.to(Device::cpu());
  for (int64_t i = 0; i < x.numel(); ++i)
    ASSERT_EQ(host.data<float>()[i], x.data<float>()[i] + 1.0f) << i;
}

TEST(CudaModel, ACudaKernelRunsOnItsRunsStream) {
  DPRUN_REQUIRE_CUDA_GPU();
  Model model(testing::add_one_graph(3), Device::cuda(0));
  EXPECT_EQ(model.plan()->device_type(), DeviceType::CUDA);
  Tensor x = rows(4, 3);
  std::vector<Tensor> out = model.run({x});  // x is copied to the GPU for the run
  EXPECT_EQ(out[0].device(), Device::cuda(0));
  expect_plus_one(out[0], x);
  out = model.run({x.to(Device::cuda(0))});
  expect_plus_one(out[0], x);
}

TEST(CudaModel, ANodeWithoutACudaKernelRunsOnTheHostBetweenGpuNodes) {
  auto graph = testing::host_fallback_graph(3);
  // Planning needs no GPU: CumSum falls back to the host, the AddOne nodes stay on the GPU.
  std::vector<NodePlacement> placed = place_nodes(*graph, DeviceType::CUDA);
  ASSERT_EQ(placed.size(), 3u);
  EXPECT_EQ(placed[0].device, DeviceType::CUDA);
  EXPECT_EQ(placed[1].device, DeviceType::CPU);
  EXPECT_EQ(placed[2].device, DeviceType::CUDA);

  DPRUN_REQUIRE_CUDA_GPU();
  Model model(graph, Device::cuda(0));
  Tensor x = rows(4, 3);
  std::vector<Tensor> out = model.run({x});
  EXPECT_EQ(out[0].device(), Device::cuda(0));
  Tensor got = out[0].to(Device::cpu());
  for (int64_t r = 0; r < 4; ++r) {
    float sum = 0;
    for (int64_t c = 0; c < 3; ++c) {
      sum += x.data<float>()[r * 3 + c] + 1.0f;
      EXPECT_EQ(got.data<float>()[r * 3 + c], sum + 1.0f) << r << "," << c;
    }
  }
}

using testing::integer_div_graph;

TEST(CudaModel, ADeviceKernelWhoseInputDtypeIsUnknownKeepsTheCpuKernelForOtherDtypes) {
  // Planning needs no GPU.
  auto plan = Plan::build(integer_div_graph(), DeviceType::CUDA);
  ASSERT_EQ(plan->steps().size(), 2u);
  const PlanStep& div = plan->steps()[1];
  EXPECT_EQ(div.kernel_device, DeviceType::CUDA);
  ASSERT_NE(div.host_kernel, nullptr);
  EXPECT_EQ(div.dtype_input, 0);
  EXPECT_EQ(div.device_dtypes,
            (std::vector<DType>{DType::Float32, DType::Float64, DType::Float16, DType::BFloat16}));
  // dprun inspect reports it from place_nodes.
  std::vector<NodePlacement> placed = place_nodes(*integer_div_graph(), DeviceType::CUDA);
  ASSERT_EQ(placed.size(), 2u);
  EXPECT_TRUE(placed[0].device_dtypes.empty());
  EXPECT_EQ(placed[1].device, DeviceType::CUDA);
  EXPECT_EQ(placed[1].device_dtypes,
            (std::vector<DType>{DType::Float32, DType::Float64, DType::Float16, DType::BFloat16}));
  EXPECT_EQ(placed[1].dtype_input, 0);
  // Where the graph gives the dtype, the planner decides once and keeps no second kernel.
  auto typed = testing::make_graph({testing::make_node("Div", {"a", "b"}, {"q"})},
                                   {{"a", DType::Float32}, {"b", DType::Float32}}, {"q"});
  typed->opset_imports[""] = 17;
  auto typed_plan = Plan::build(typed, DeviceType::CUDA);
  EXPECT_EQ(typed_plan->steps()[0].host_kernel, nullptr);
  EXPECT_TRUE(typed_plan->steps()[0].device_dtypes.empty());
}

TEST(CudaModel, DataParallelOverEveryGpu) {
  DPRUN_REQUIRE_CUDA_GPU();
  std::vector<Device> gpus = all_devices();
  auto model = std::make_shared<Model>(testing::add_one_graph(3), gpus[0]);
  DataParallelOptions options;
  options.device_ids = gpus;
  DataParallel parallel(model, options);
  Tensor x = rows(static_cast<int64_t>(gpus.size()) * 5 + 1, 3);
  std::vector<Tensor> out = parallel.forward({x});
  EXPECT_EQ(out[0].device(), gpus[0]);
  expect_plus_one(out[0], x);
  for (const ReplicaTiming& t : parallel.last_run().timings) EXPECT_GT(t.busy_seconds, 0.0);
}

}  // namespace
}  // namespace dprun
