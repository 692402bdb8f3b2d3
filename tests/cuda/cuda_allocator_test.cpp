// The GPU caching allocator: size classes, reuse of freed blocks, peak bytes, blocks kept with
// the stream they were allocated on, cross-stream frees, record_stream, and out-of-memory errors.
#include "engine/backends/cuda/cuda_allocator.h"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>

#include "cuda_test_util.h"
#include "engine/backends/cuda/cuda_execution_context.h"
#include "engine/tensor.h"

namespace dprun {
namespace {

TEST(CudaCachingAllocator, SizeClasses) {
  EXPECT_EQ(CudaCachingAllocator::size_class(1), 512u);
  EXPECT_EQ(CudaCachingAllocator::size_class(512), 512u);
  EXPECT_EQ(CudaCachingAllocator::size_class(513), 640u);
  EXPECT_EQ(CudaCachingAllocator::size_class(1000), 1024u);
  EXPECT_EQ(CudaCachingAllocator::size_class(1025), 1280u);
  EXPECT_EQ(CudaCachingAllocator::size_class(5000), 5120u);
  EXPECT_EQ(CudaCachingAllocator::size_class((3u << 20) + 1), 3670016u);
}

TEST(CudaCachingAllocator, ReusesFreedBlocksAndCountsThePeak) {
  DPRUN_REQUIRE_CUDA_GPU();
  CudaCachingAllocator allocator(Device::cuda(0));
  void* p = allocator.allocate(1000);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 256, 0u);
  EXPECT_EQ(allocator.stats().in_use, 1024u);
  allocator.deallocate(p, 1000);
  EXPECT_EQ(allocator.stats().in_use, 0u);
  EXPECT_EQ(allocator.stats().cached, 1024u);
  void* q = allocator.allocate(900);  // same class, same (default) stream: the same block
  EXPECT_EQ(q, p);
  void* r = allocator.allocate(5000);
  AllocatorStats s = allocator.stats();
  EXPECT_EQ(s.in_use, 1024u + 5120u);
  EXPECT_EQ(s.peak_in_use, 1024u + 5120u);
  EXPECT_EQ(s.cached, 0u);
  allocator.deallocate(q, 900);
  allocator.deallocate(r, 5000);
  EXPECT_EQ(allocator.stats().peak_in_use, 1024u + 5120u);
  allocator.release_cached();
  EXPECT_EQ(allocator.stats().cached, 0u);
  EXPECT_EQ(allocator.stats().in_use, 0u);
}

TEST(CudaCachingAllocator, BlocksStayWithTheirStream) {
  DPRUN_REQUIRE_CUDA_GPU();
  Backend& cuda = backend_for(DeviceType::CUDA);
  CudaCachingAllocator allocator(Device::cuda(0));
  auto a = cuda.create_execution_context(Device::cuda(0), {});
  void* p = allocator.allocate(1000);
  allocator.deallocate(p, 1000);
  {
    auto b = cuda.create_execution_context(Device::cuda(0), {});
    void* q = allocator.allocate(1000);
    EXPECT_NE(q, p);  // p is a's stream's
    allocator.deallocate(q, 1000);
  }
  EXPECT_EQ(allocator.allocate(1000), p);
  allocator.deallocate(p, 1000);
  allocator.release_cached();
}

TEST(CudaCachingAllocator, AFreeOnAnotherStreamWaitsForItsEvent) {
  DPRUN_REQUIRE_CUDA_GPU();
  Backend& cuda = backend_for(DeviceType::CUDA);
  CudaCachingAllocator allocator(Device::cuda(0));
  auto a = cuda.create_execution_context(Device::cuda(0), {});
  void* p = allocator.allocate(4096);
  {
    auto b = cuda.create_execution_context(Device::cuda(0), {});
    allocator.deallocate(p, 4096);  // b's stream may still read it
    EXPECT_EQ(allocator.stats().cached, 4096u);
    b->synchronize();  // the event recorded on b's stream is now complete
  }
  EXPECT_EQ(allocator.allocate(4096), p);  // back on a's stream
  allocator.deallocate(p, 4096);
  allocator.release_cached();
}

// Holds a stream busy until *flag is set (cudaLaunchHostFunc).
void CUDART_CB spin_until_set(void* flag) {
  while (!static_cast<std::atomic<bool>*>(flag)->load()) std::this_thread::yield();
}

TEST(CudaCachingAllocator, ABlockRecordedOnAThirdStreamWaitsForThatStream) {
  DPRUN_REQUIRE_CUDA_GPU();
  Backend& cuda = backend_for(DeviceType::CUDA);
  CudaCachingAllocator allocator(Device::cuda(0));
  auto a = cuda.create_execution_context(Device::cuda(0), {});
  void* p = allocator.allocate(4096);
  std::atomic<bool> released{false};
  cudaStream_t third = nullptr;
  {
    auto b = cuda.create_execution_context(Device::cuda(0), {});
    third = CudaExecutionContext::of(*b).stream();
    ASSERT_EQ(cudaLaunchHostFunc(third, spin_until_set, &released), cudaSuccess);
  }
  allocator.record_stream(p, third);  // the busy stream uses p
  allocator.deallocate(p, 4096);      // on a's stream, p's own
  void* q = allocator.allocate(4096);
  EXPECT_NE(q, p);  // p waits for the third stream's event
  released = true;
  ASSERT_EQ(cudaStreamSynchronize(third), cudaSuccess);
  allocator.deallocate(q, 4096);
  EXPECT_EQ(allocator.allocate(4096), p);
  allocator.deallocate(p, 4096);
  allocator.release_cached();
}

TEST(CudaCachingAllocator, OutOfMemoryNamesTheDeviceAndTheRequest) {
  DPRUN_REQUIRE_CUDA_GPU();
  CudaCachingAllocator allocator(Device::cuda(0));
  const size_t huge = size_t{1} << 50;  // 1 PiB
  try {
    allocator.allocate(huge);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "out of memory on cuda:0 allocating 1125899906842624 bytes (0 in use, 0 cached): "
              "cudaMalloc: out of memory (cudaErrorMemoryAllocation)");
  }
  EXPECT_EQ(allocator.stats().in_use, 0u);
}

TEST(CudaCachingAllocator, TheBackendHasOnePerDevice) {
  DPRUN_REQUIRE_CUDA_GPU();
  Backend& cuda = backend_for(DeviceType::CUDA);
  auto allocator = cuda.allocator(Device::cuda(0));
  EXPECT_EQ(allocator, cuda.allocator(Device::cuda(0)));
  EXPECT_EQ(allocator->device(), Device::cuda(0));
  EXPECT_NE(dynamic_cast<CudaCachingAllocator*>(allocator.get()), nullptr);
}

Tensor counting(int64_t n) {
  Tensor t = Tensor::empty({n}, DType::Float32);
  for (int64_t i = 0; i < n; ++i) t.data<float>()[i] = static_cast<float>(i);
  return t;
}

TEST(CudaPinnedHostAllocator, PinMemoryCopiesIntoPageLockedHostMemoryWhereAGpuIsPresent) {
  const Tensor t = counting(1000);
  if (!testing::cuda_unusable_reason().empty()) {
    // No GPU: there is no page-locked memory to be had, and the tensor is kept.
    EXPECT_EQ(backend_for(DeviceType::CUDA).pinned_host_allocator(), nullptr);
    EXPECT_EQ(t.pin_memory(Device::cuda(0)).raw_data(), t.raw_data());
    GTEST_SKIP() << testing::cuda_unusable_reason();
  }
  const Tensor pinned = t.pin_memory(Device::cuda(0));
  EXPECT_NE(pinned.raw_data(), t.raw_data());
  EXPECT_EQ(pinned.device(), Device::cpu());
  ASSERT_EQ(pinned.shape(), t.shape());
  for (int64_t i = 0; i < 1000; ++i) ASSERT_EQ(pinned.data<float>()[i], static_cast<float>(i));
  cudaPointerAttributes attributes{};
  ASSERT_EQ(cudaPointerGetAttributes(&attributes, pinned.raw_data()), cudaSuccess);
  EXPECT_EQ(attributes.type, cudaMemoryTypeHost);  // registered with CUDA, not pageable
  // Its rows reach the GPU and come back unchanged.
  const Tensor back = pinned.narrow(0, 10, 20).to(Device::cuda(0)).to(Device::cpu());
  for (int64_t i = 0; i < 20; ++i) ASSERT_EQ(back.data<float>()[i], static_cast<float>(10 + i));
  // One allocator for every GPU.
  EXPECT_EQ(backend_for(DeviceType::CUDA).pinned_host_allocator(),
            backend_for(DeviceType::CUDA).pinned_host_allocator());
}

}  // namespace
}  // namespace dprun
