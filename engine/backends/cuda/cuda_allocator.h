#pragma once
// Device memory of one GPU: a caching allocator over cudaMalloc (never managed memory).
#include <cuda_runtime_api.h>

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/allocator.h"

namespace dprun {

/// Caches freed blocks in size-class bins per stream, so repeated runs reuse their buffers
/// instead of calling cudaMalloc and cudaFree (which synchronize the device).
///
/// Memory is reused in stream order. A block belongs to the stream that was current
/// (current_stream) when it was allocated, and only allocations on that stream get it back.
/// Freed on its own stream, or with no context's stream current (the default stream, on which
/// the backend queues nothing it does not wait for), it is reusable at once: later work on its
/// stream runs after earlier work. Freed while another context's stream is current (a tensor
/// made on one run's stream and dropped on another's), it is reusable only once an event
/// recorded on the freeing stream has completed. Work queued on a third stream is tracked with
/// record_stream (PyTorch's semantics): each stream recorded for the block gets an event when the
/// block is freed, and the block is reused only once all those events have completed. The
/// engine records a block's use at stream boundaries (engine/stream_order.h: a copy, a
/// collective, a run's inputs), never per kernel.
///
/// While a stream captures a CUDA graph (engine/stream_capture.h), allocations on it come from
/// the graph's private pool, as in PyTorch: a block freed into the pool is handed out again only
/// inside it (the graph orders its own reuse), and no block of the pool goes to anyone else until
/// the graph is released, so every replay finds its buffers where the capture put them.
///
/// When cudaMalloc runs out of memory, the device is synchronized, every cached block is freed
/// and the allocation is tried once more; then Error names the device, the request and the
/// bytes in use and cached. Thread-safe.
class CudaCachingAllocator final : public Allocator {
 public:
  explicit CudaCachingAllocator(Device device);
  /// Frees nothing: the allocator lives as long as the process (CudaBackend keeps it), and
  /// the CUDA runtime may already be unloaded when static objects are destroyed.
  ~CudaCachingAllocator() override = default;

  /// 256-byte aligned device memory of at least `bytes` bytes on the current stream.
  void* allocate(size_t bytes) override;
  /// Never throws: a block whose release cannot be ordered is dropped from the cache.
  void deallocate(void* ptr, size_t bytes) override;
  /// record_stream: the block that starts at `ptr` is used by work queued on `stream` (of any
  /// GPU); its reuse waits for that work. Does nothing for the block's own stream, the legacy
  /// default stream (whose work the backend waits for) or memory not allocated here.
  void record_stream(const void* ptr, cudaStream_t stream);
  Device device() const override { return device_; }
  /// in_use and cached count whole size classes; peak_in_use is the maximum of in_use.
  AllocatorStats stats() const override;
  /// Synchronizes the device and returns every cached block to CUDA (cudaFree).
  void release_cached() override;

  /// The private memory pool of one captured graph.
  struct PrivatePool {
    std::map<size_t, std::vector<void*>> free;  // by size class
    bool released = false;                      // the graph is gone
  };
  /// From now until end_pool(stream), allocations on `stream` come from a new private pool.
  std::shared_ptr<PrivatePool> begin_pool(cudaStream_t stream);
  void end_pool(cudaStream_t stream);
  /// The graph that owns `pool` is gone: its free blocks go back to CUDA (cudaFree), the others
  /// when they are freed. Never throws.
  void release_pool(const std::shared_ptr<PrivatePool>& pool) noexcept;

  /// The size class a request of `bytes` is rounded up to: at least 512 bytes, then four
  /// classes per power of two (rounding waste under 25%).
  static size_t size_class(size_t bytes);

 private:
  struct Block {
    size_t size = 0;  // the size class
    cudaStream_t stream = nullptr;
    std::vector<cudaStream_t> uses;     // other streams recorded with record_stream
    std::shared_ptr<PrivatePool> pool;  // the graph pool it belongs to; nullptr for most
  };
  struct PendingFree {
    void* ptr = nullptr;
    Block block;
    std::vector<cudaEvent_t> events;  // reusable when all have completed
  };
  using Bin = std::pair<cudaStream_t, size_t>;

  /// A block of size class `cls` from `pool`, or a new one. Caller holds mutex_.
  void* allocate_in_pool_locked(PrivatePool& pool, size_t cls, size_t bytes);
  /// Moves pending frees whose event has completed into their bins. Caller holds mutex_.
  void collect_pending_locked();
  /// Synchronizes the device and cudaFree's every cached and pending block. Caller holds mutex_.
  void release_cached_locked();

  Device device_;
  mutable std::mutex mutex_;
  std::unordered_map<void*, Block> live_;
  std::map<Bin, std::vector<void*>> free_;
  std::vector<PendingFree> pending_;
  std::map<cudaStream_t, std::shared_ptr<PrivatePool>> capturing_;  // streams that capture
  AllocatorStats stats_;
};

/// Page-locked host memory (cudaHostAlloc, portable: every GPU copies it by DMA), for host
/// tensors that feed GPUs: a copy from pageable memory goes through the driver's staging
/// buffers at a fraction of the link's speed (bench/README.md). Not cached: Tensor::pin_memory
/// is for tensors made once and copied many times, and page-locking is slow.
class CudaPinnedHostAllocator final : public Allocator {
 public:
  void* allocate(size_t bytes) override;
  void deallocate(void* ptr, size_t bytes) override;
  Device device() const override { return Device::cpu(); }
};

}  // namespace dprun
