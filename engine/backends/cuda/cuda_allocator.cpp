#include "engine/backends/cuda/cuda_allocator.h"

#include <algorithm>
#include <bit>

#include "engine/backends/cuda/cuda_check.h"
#include "engine/backends/cuda/cuda_devices.h"
#include "engine/backends/cuda/cuda_stream.h"

namespace dprun {

namespace {
constexpr size_t kMinBlock = 512;
}

CudaCachingAllocator::CudaCachingAllocator(Device device) : device_(device) {}

size_t CudaCachingAllocator::size_class(size_t bytes) {
  if (bytes <= kMinBlock) return kMinBlock;
  size_t power = std::bit_floor(bytes);
  size_t step = power / 4;
  return (bytes + step - 1) / step * step;
}

void* CudaCachingAllocator::allocate(size_t bytes) {
  const size_t cls = size_class(bytes);
  const cudaStream_t stream = current_stream(device_.index);
  std::lock_guard lock(mutex_);
  std::shared_ptr<PrivatePool> pool;
  if (auto capture = capturing_.find(stream); capture != capturing_.end()) pool = capture->second;
  if (!pending_.empty()) collect_pending_locked();
  void* ptr = nullptr;
  if (pool) {
    ptr = allocate_in_pool_locked(*pool, cls, bytes);
  } else if (auto bin = free_.find({stream, cls}); bin != free_.end() && !bin->second.empty()) {
    ptr = bin->second.back();
    bin->second.pop_back();
    stats_.cached -= cls;
  } else {
    CudaDeviceGuard guard(device_.index);
    cudaError_t status = cudaMalloc(&ptr, cls);
    if (status == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      release_cached_locked();
      status = cudaMalloc(&ptr, cls);
    }
    cuda_check(status, "out of memory on ", device_.to_string(), " allocating ", bytes, " bytes (",
               stats_.in_use, " in use, ", stats_.cached, " cached): cudaMalloc");
  }
  live_[ptr] = {cls, stream, {}, std::move(pool)};
  stats_.in_use += cls;
  if (stats_.in_use > stats_.peak_in_use) stats_.peak_in_use = stats_.in_use;
  return ptr;
}

void* CudaCachingAllocator::allocate_in_pool_locked(PrivatePool& pool, size_t cls, size_t bytes) {
  void* ptr = nullptr;
  if (auto bin = pool.free.find(cls); bin != pool.free.end() && !bin->second.empty()) {
    ptr = bin->second.back();
    bin->second.pop_back();
    stats_.cached -= cls;
    return ptr;
  }
  // No retry after releasing the cache: that synchronizes the device, which a capture forbids.
  CudaDeviceGuard guard(device_.index);
  cuda_check(cudaMalloc(&ptr, cls), "out of memory on ", device_.to_string(), " allocating ", bytes,
             " bytes for a CUDA graph (", stats_.in_use, " in use, ", stats_.cached,
             " cached): cudaMalloc");
  return ptr;
}

std::shared_ptr<CudaCachingAllocator::PrivatePool> CudaCachingAllocator::begin_pool(
    cudaStream_t stream) {
  std::lock_guard lock(mutex_);
  auto pool = std::make_shared<PrivatePool>();
  capturing_[stream] = pool;
  return pool;
}

void CudaCachingAllocator::end_pool(cudaStream_t stream) {
  std::lock_guard lock(mutex_);
  capturing_.erase(stream);
}

void CudaCachingAllocator::release_pool(const std::shared_ptr<PrivatePool>& pool) noexcept {
  std::lock_guard lock(mutex_);
  pool->released = true;
  CudaDeviceGuard guard(device_.index);
  for (auto& [cls, blocks] : pool->free)
    for (void* p : blocks) {
      if (cudaFree(p) != cudaSuccess) cudaGetLastError();
      stats_.cached -= cls;
    }
  pool->free.clear();
}

void CudaCachingAllocator::record_stream(const void* ptr, cudaStream_t stream) {
  if (stream == nullptr) return;
  std::lock_guard lock(mutex_);
  auto it = live_.find(const_cast<void*>(ptr));
  if (it == live_.end() || it->second.stream == stream) return;
  std::vector<cudaStream_t>& uses = it->second.uses;
  if (std::find(uses.begin(), uses.end(), stream) == uses.end()) uses.push_back(stream);
}

void CudaCachingAllocator::deallocate(void* ptr, size_t) {
  if (ptr == nullptr) return;
  const cudaStream_t freeing = current_stream(device_.index);
  std::lock_guard lock(mutex_);
  auto it = live_.find(ptr);
  if (it == live_.end()) return;  // not ours: nothing to give back
  Block block = std::move(it->second);
  live_.erase(it);
  stats_.in_use -= block.size;
  if (block.pool) {
    // The graph orders its blocks' reuse itself; once it is gone they go back to CUDA.
    if (!block.pool->released) {
      block.pool->free[block.size].push_back(ptr);
      stats_.cached += block.size;
    } else if (cudaFree(ptr) != cudaSuccess) {
      cudaGetLastError();
    }
    return;
  }
  // The streams whose queued work may still use the block: the freeing stream (without a
  // context it is the default stream, on which the backend queues nothing it does not wait
  // for) and those recorded with record_stream. Reuse waits for an event recorded on each.
  std::vector<cudaStream_t> streams = std::move(block.uses);
  if (freeing != nullptr && freeing != block.stream &&
      std::find(streams.begin(), streams.end(), freeing) == streams.end())
    streams.push_back(freeing);
  if (!streams.empty()) {
    PendingFree pending{ptr, block, {}};
    bool ordered = true;
    for (cudaStream_t stream : streams) {
      cudaEvent_t event = nullptr;
      if (cudaEventCreateWithFlags(&event, cudaEventDisableTiming) == cudaSuccess &&
          cudaEventRecord(event, stream) == cudaSuccess) {
        pending.events.push_back(event);
        continue;
      }
      cudaGetLastError();
      if (event) cudaEventDestroy(event);
      // Cannot order the reuse after this stream by an event: wait for it here.
      if (cudaStreamSynchronize(stream) != cudaSuccess) {
        cudaGetLastError();
        ordered = false;
      }
    }
    if (!ordered) {
      for (cudaEvent_t event : pending.events) cudaEventDestroy(event);
      return;  // cannot order the reuse: leave the block out of the cache
    }
    stats_.cached += block.size;
    if (!pending.events.empty()) {
      pending_.push_back(std::move(pending));
      return;
    }
    free_[{block.stream, block.size}].push_back(ptr);
    return;
  }
  free_[{block.stream, block.size}].push_back(ptr);
  stats_.cached += block.size;
}

void CudaCachingAllocator::collect_pending_locked() {
  size_t kept = 0;
  for (PendingFree& p : pending_) {
    bool ready = true;
    for (cudaEvent_t event : p.events) {
      const cudaError_t status = cudaEventQuery(event);
      if (status == cudaErrorNotReady) {
        ready = false;
        break;
      }
      if (status != cudaSuccess) cudaGetLastError();
    }
    if (!ready) {
      pending_[kept++] = std::move(p);
      continue;
    }
    for (cudaEvent_t event : p.events) cudaEventDestroy(event);
    free_[{p.block.stream, p.block.size}].push_back(p.ptr);
  }
  pending_.resize(kept);
}

void CudaCachingAllocator::release_cached_locked() {
  CudaDeviceGuard guard(device_.index);
  cuda_check(cudaDeviceSynchronize(), device_.to_string(), ": cudaDeviceSynchronize");
  for (PendingFree& p : pending_) {
    for (cudaEvent_t event : p.events) cudaEventDestroy(event);
    free_[{p.block.stream, p.block.size}].push_back(p.ptr);
  }
  pending_.clear();
  for (auto& [bin, blocks] : free_)
    for (void* p : blocks) cuda_check(cudaFree(p), device_.to_string(), ": cudaFree");
  free_.clear();
  stats_.cached = 0;
}

void CudaCachingAllocator::release_cached() {
  std::lock_guard lock(mutex_);
  release_cached_locked();
}

AllocatorStats CudaCachingAllocator::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

void* CudaPinnedHostAllocator::allocate(size_t bytes) {
  void* ptr = nullptr;
  cuda_check(cudaHostAlloc(&ptr, bytes == 0 ? 1 : bytes, cudaHostAllocPortable),
             "cudaHostAlloc of ", bytes, " bytes of pinned host memory");
  return ptr;
}

void CudaPinnedHostAllocator::deallocate(void* ptr, size_t) {
  if (ptr) cudaFreeHost(ptr);
}

}  // namespace dprun
