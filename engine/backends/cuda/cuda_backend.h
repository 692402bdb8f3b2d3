#pragma once
// CUDA backend: the GPUs cuda:0..cuda:N-1. Each GPU has a caching allocator over cudaMalloc
// (CudaCachingAllocator); runs execute on a CudaExecutionContext (a pooled stream with its
// cuBLAS and cuDNN handles); copies go on the calling thread's current stream. Compiled only
// when the build has CUDA (DPRUN_CUDA); without a driver or a GPU it reports no devices, and
// using a CUDA device fails with "device cuda:0: no CUDA GPU is present".
#include <map>
#include <memory>
#include <mutex>

#include "engine/backend.h"
#include "engine/backends/cuda/cuda_stream_pool.h"

namespace dprun {

class CudaBackend : public Backend {
 public:
  DeviceType type() const override { return DeviceType::CUDA; }
  /// GPUs visible to the process; 0 without a driver or a GPU.
  int device_count() const override;
  /// Throws Error "device cuda:N: no CUDA GPU is present" when there is none, and "device
  /// cuda:N: only K CUDA GPU(s) are present (cuda:0..cuda:K-1)" past the last one.
  void check_device(Device device) const override;
  std::shared_ptr<Allocator> allocator(Device device) override;
  /// A CudaPinnedHostAllocator shared by every GPU; nullptr where no GPU is present.
  std::shared_ptr<Allocator> pinned_host_allocator() override;
  /// cudaMemcpyAsync (cudaMemcpyPeerAsync between GPUs) on the calling thread's current stream
  /// of the GPU side (the destination's when both are GPUs). Waits for the copy when it is to
  /// the host, from page-locked host memory, or when no execution context is current; otherwise
  /// (from pageable memory, which CUDA stages before the call returns, within a GPU or between
  /// GPUs) it is ordered on that stream like a kernel (events: engine/stream_order.h).
  void copy(void* dst, Device dst_device, const void* src, Device src_device,
            size_t bytes) override;
  /// cudaDeviceSynchronize on the GPU.
  void synchronize(Device device) override;
  /// The GPU's name, global memory and multiprocessor count; `device_count` does not matter.
  DeviceProperties properties(Device device, int device_count) const override;
  /// A CudaExecutionContext: a pooled stream and its handles, the GPU made current. `config`
  /// does not matter (host threads are the calling thread).
  std::unique_ptr<ExecutionContext> create_execution_context(
      Device device, const ExecutionConfig& config) override;
  /// On NCCL (nccl_collectives.h, which says what NCCL guarantees about summation order).
  void broadcast_coalesced(const std::vector<Tensor>& sources,
                           const std::vector<std::vector<Tensor>>& destinations) override;
  void reduce_add_coalesced(const std::vector<std::vector<Tensor>>& inputs,
                            const std::vector<Tensor>& outputs) override;

  /// The process's CUDA backend; never destroyed (see CudaStreamResources).
  static CudaBackend& instance();

 protected:
  /// With options.fusion, op fusion (fuse_ops: MatMul with its bias on cuBLASLt's epilogue, the
  /// erf form of GELU in one pass, activations after MatMulBias and Gemm applied by the product's
  /// kernel); options.layout does not matter (cuDNN takes NCHW as it is).
  std::shared_ptr<const Graph> rewrite_for_kernels(
      std::shared_ptr<const Graph> graph, const GraphRewriteOptions& options) const override;

 private:
  CudaBackend() = default;
  std::mutex mutex_;
  std::map<int, std::shared_ptr<Allocator>> allocators_;
  std::shared_ptr<Allocator> pinned_;
  CudaStreamPool streams_;
};

}  // namespace dprun
