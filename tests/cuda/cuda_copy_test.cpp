// Copies between host and GPU and between GPUs, through Tensor (which routes them to the CUDA
// backend): every size round-trips, and inside a run copies are ordered on the run's stream.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "cuda/cuda_test_kernels.h"
#include "cuda_test_util.h"
#include "engine/backends/cuda/cuda_execution_context.h"
#include "engine/tensor.h"

namespace dprun {
namespace {

Tensor pattern(int64_t n) {
  std::vector<uint8_t> bytes(static_cast<size_t>(n));
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 7 + 3);
  return Tensor::from_vector<uint8_t>({n}, bytes);
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  if (a.nbytes() != b.nbytes()) return false;
  const auto* x = static_cast<const uint8_t*>(a.raw_data());
  const auto* y = static_cast<const uint8_t*>(b.raw_data());
  return std::equal(x, x + a.nbytes(), y);
}

TEST(CudaCopy, HostAndGpuRoundTripEverySize) {
  DPRUN_REQUIRE_CUDA_GPU();
  for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{3}, int64_t{4096}, int64_t{(1 << 20) + 7}}) {
    Tensor host = pattern(n);
    Tensor gpu = host.to(Device::cuda(0));
    EXPECT_EQ(gpu.device(), Device::cuda(0));
    Tensor back = gpu.to(Device::cpu());
    EXPECT_EQ(back.device(), Device::cpu());
    EXPECT_TRUE(same_bytes(back, host)) << n;
  }
}

TEST(CudaCopy, OnTheGpuAndBetweenGpus) {
  DPRUN_REQUIRE_CUDA_GPU();
  Tensor host = pattern(100000);
  Tensor a = host.to(Device::cuda(0));
  Tensor b = a.clone();
  EXPECT_FALSE(b.shares_storage_with(a));
  Tensor c = Tensor::empty({100000}, DType::UInt8, Device::cuda(0));
  c.copy_from(b);
  EXPECT_TRUE(same_bytes(c.to(Device::cpu()), host));
  if (backend_for(DeviceType::CUDA).device_count() > 1) {
    Tensor d = c.to(Device::cuda(1));
    EXPECT_EQ(d.device(), Device::cuda(1));
    EXPECT_TRUE(same_bytes(d.to(Device::cpu()), host));
  }
}

TEST(CudaCopy, ZerosOnTheGpu) {
  DPRUN_REQUIRE_CUDA_GPU();
  Tensor z = Tensor::zeros({5, 3}, DType::Float32, Device::cuda(0)).to(Device::cpu());
  for (int64_t i = 0; i < z.numel(); ++i) EXPECT_EQ(z.data<float>()[i], 0.0f);
}

TEST(CudaCopy, InARunCopiesAreOrderedOnTheRunsStream) {
  DPRUN_REQUIRE_CUDA_GPU();
  const int64_t n = 1 << 22;
  auto context = backend_for(DeviceType::CUDA).create_execution_context(Device::cuda(0), {});
  cudaStream_t stream = CudaExecutionContext::of(*context).stream();
  Tensor t = Tensor::zeros({n}, DType::Float32).to(Device::cuda(0));
  testing::add_one_on_stream(t.data<float>(), n, stream);
  Tensor u = t.clone();  // device to device on the stream: after the kernel, without waiting
  testing::add_one_on_stream(u.data<float>(), n, stream);
  Tensor back = u.to(Device::cpu());  // waits for the stream
  for (int64_t i = 0; i < n; i += 65537) ASSERT_EQ(back.data<float>()[i], 2.0f) << i;
  Tensor first = t.to(Device::cpu());
  EXPECT_EQ(first.data<float>()[n - 1], 1.0f);
}

}  // namespace
}  // namespace dprun
