// The CUDA backend through the Backend interface. Without a GPU, every use of a CUDA device
// fails with one clear message and "all" means the CPU devices; with one, the GPU's
// properties and its execution contexts (a pooled stream with its handles bound to it).
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "cuda/cuda_test_kernels.h"
#include "cuda_test_util.h"
#include "engine/backends/cuda/cuda_check.h"
#include "engine/backends/cuda/cuda_execution_context.h"
#include "engine/model.h"
#include "engine/parallel/device_list.h"
#include "engine/plan.h"

namespace dprun {
namespace {

Backend& cuda() {
  return backend_for(DeviceType::CUDA);
}

void expect_error(const std::function<void()>& use, const std::string& message) {
  try {
    use();
    ADD_FAILURE() << "no error, expected: " << message;
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), message);
  }
}

TEST(CudaBackend, IsRegisteredInThisBuild) {
  EXPECT_EQ(cuda().type(), DeviceType::CUDA);
  EXPECT_EQ(backend_available(DeviceType::CUDA), cuda().device_count() > 0);
}

TEST(CudaBackend, WithoutAGpuEveryUseSaysSo) {
  if (backend_available(DeviceType::CUDA)) GTEST_SKIP() << "a CUDA GPU is present";
  const Device gpu = Device::cuda(0);
  const std::string message = "device cuda:0: no CUDA GPU is present";
  EXPECT_EQ(cuda().device_count(), 0);
  expect_error([&] { cuda().check_device(gpu); }, message);
  expect_error([&] { cuda().allocator(gpu); }, message);
  expect_error([&] { cuda().create_execution_context(gpu, {}); }, message);
  expect_error([&] { cuda().properties(gpu, 1); }, message);
  expect_error([&] { cuda().synchronize(gpu); }, message);
  expect_error([&] { Tensor::empty({2}, DType::Float32, gpu); }, message);
  expect_error([&] { Model(testing::add_one_graph(3), gpu); }, message);
  expect_error([&] { cuda().check_device(Device::cuda(3)); },
               "device cuda:3: no CUDA GPU is present");
  EXPECT_EQ(all_devices(), parse_device_list("cpu"));
}

TEST(CudaBackend, PlansForCudaNameEveryNodeWithNoKernelAnywhere) {
  // Compiling needs no GPU: kernels are chosen by device type.
  auto graph = testing::add_one_graph(3);
  auto plan = Plan::build(graph, DeviceType::CUDA);
  ASSERT_EQ(plan->steps().size(), 1u);
  EXPECT_NE(plan->steps()[0].kernel, nullptr);
  EXPECT_EQ(plan->steps()[0].kernel_device, DeviceType::CUDA);
  // A node without a CUDA kernel falls back to its CPU kernel (CudaModel tests); one that has
  // neither fails the plan.
  Node unknown;
  unknown.name = "mystery";
  unknown.op_type = "NoSuchOp";
  unknown.inputs = {"y"};
  unknown.outputs = {"z"};
  auto two = std::make_shared<Graph>(*graph);
  two->nodes.push_back(unknown);
  two->outputs = {{"z", {DType::Float32, std::nullopt}}};
  expect_error([&] { Plan::build(two, DeviceType::CUDA); },
               "1 node has no cuda kernel (nor a cpu kernel to fall back on): [NoSuchOp] node "
               "'mystery' (unknown op)");
}

TEST(CudaBackend, DevicesPastTheLastAreRefused) {
  DPRUN_REQUIRE_CUDA_GPU();
  const int n = cuda().device_count();
  std::string present =
      n == 1 ? "only 1 CUDA GPU is present (cuda:0)"
             : "only " + std::to_string(n) +
                   " CUDA GPUs are present (cuda:0..cuda:" + std::to_string(n - 1) + ")";
  expect_error([&] { cuda().check_device(Device::cuda(n)); },
               "device cuda:" + std::to_string(n) + ": " + present);
}

TEST(CudaBackend, PropertiesDescribeTheGpu) {
  DPRUN_REQUIRE_CUDA_GPU();
  cudaDeviceProp prop{};
  ASSERT_EQ(cudaGetDeviceProperties(&prop, 0), cudaSuccess);
  DeviceProperties p = cuda().properties(Device::cuda(0), 4);
  EXPECT_EQ(p.name, std::string(prop.name));
  EXPECT_EQ(p.total_memory, prop.totalGlobalMem);
  EXPECT_EQ(p.compute_units, prop.multiProcessorCount);
  EXPECT_GT(p.compute_units, 0);
}

TEST(CudaBackend, AllMeansEveryGpu) {
  DPRUN_REQUIRE_CUDA_GPU();
  std::vector<Device> gpus;
  for (int i = 0; i < cuda().device_count(); ++i) gpus.push_back(Device::cuda(i));
  EXPECT_EQ(all_devices(), gpus);
}

TEST(CudaExecutionContext, RefusesAnotherDevicesContext) {
  auto cpu = backend_for(DeviceType::CPU).create_execution_context(Device::cpu(0), {});
  expect_error([&] { CudaExecutionContext::of(*cpu); },
               "a CUDA kernel cannot run on cpu:0: its execution context is not a CUDA stream");
}

TEST(CudaExecutionContext, HoldsAStreamWithItsHandlesBound) {
  DPRUN_REQUIRE_CUDA_GPU();
  EXPECT_EQ(current_stream(0), nullptr);
  {
    auto context = cuda().create_execution_context(Device::cuda(0), {.threads = 8});
    CudaExecutionContext& gpu = CudaExecutionContext::of(*context);
    EXPECT_EQ(gpu.device(), Device::cuda(0));
    EXPECT_EQ(gpu.threads(), 1);
    ASSERT_NE(gpu.stream(), nullptr);
    EXPECT_EQ(current_stream(0), gpu.stream());
    int current = -1;
    ASSERT_EQ(cudaGetDevice(&current), cudaSuccess);
    EXPECT_EQ(current, 0);
    cudaStream_t bound = nullptr;
    ASSERT_EQ(cublasGetStream(gpu.cublas(), &bound), CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(bound, gpu.stream());
    cublasMath_t mode{};
    ASSERT_EQ(cublasGetMathMode(gpu.cublas(), &mode), CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(mode, CUBLAS_DEFAULT_MATH);
    bound = nullptr;
    ASSERT_EQ(cudnnGetStream(gpu.cudnn(), &bound), CUDNN_STATUS_SUCCESS);
    EXPECT_EQ(bound, gpu.stream());
    EXPECT_EQ(gpu.cublas(), gpu.cublas());  // created once
  }
  EXPECT_EQ(current_stream(0), nullptr);
}

TEST(CudaExecutionContext, ConcurrentContextsGetTheirOwnPooledStreams) {
  DPRUN_REQUIRE_CUDA_GPU();
  cudaStream_t first = nullptr, second = nullptr;
  {
    auto a = cuda().create_execution_context(Device::cuda(0), {});
    auto b = cuda().create_execution_context(Device::cuda(0), {});
    first = CudaExecutionContext::of(*a).stream();
    second = CudaExecutionContext::of(*b).stream();
    EXPECT_NE(first, second);
    EXPECT_EQ(current_stream(0), second);  // the innermost context's
  }
  auto again = cuda().create_execution_context(Device::cuda(0), {});
  cudaStream_t reused = CudaExecutionContext::of(*again).stream();
  EXPECT_TRUE(reused == first || reused == second);
}

TEST(CudaExecutionContext, SynchronizeWaitsForTheQueuedWork) {
  DPRUN_REQUIRE_CUDA_GPU();
  const int64_t n = 1 << 20;
  Tensor host = Tensor::zeros({n}, DType::Float32);
  auto context = cuda().create_execution_context(Device::cuda(0), {});
  CudaExecutionContext& gpu = CudaExecutionContext::of(*context);
  Tensor device = host.to(Device::cuda(0));
  for (int i = 0; i < 50; ++i) testing::add_one_on_stream(device.data<float>(), n, gpu.stream());
  gpu.synchronize();
  EXPECT_EQ(cudaStreamQuery(gpu.stream()), cudaSuccess);
  Tensor back = device.to(Device::cpu());
  for (int64_t i = 0; i < n; i += 4099) ASSERT_EQ(back.data<float>()[i], 50.0f) << i;
}

}  // namespace
}  // namespace dprun
