#include "engine/backends/cuda/cuda_backend.h"

#include <cuda_runtime_api.h>

#include "engine/backends/cuda/cuda_allocator.h"
#include "engine/backends/cuda/cuda_capture.h"
#include "engine/backends/cuda/cuda_check.h"
#include "engine/backends/cuda/cuda_devices.h"
#include "engine/backends/cuda/cuda_execution_context.h"
#include "engine/backends/cuda/cuda_stream.h"
#include "engine/backends/cuda/nccl_collectives.h"
#include "engine/rewrites/op_fusion.h"

namespace dprun {

namespace {
struct CudaBackendRegistrar {
  // Registering asks nothing of CUDA: the driver is first touched when devices are counted.
  CudaBackendRegistrar() { register_backend(DeviceType::CUDA, &CudaBackend::instance()); }
} registrar;

cudaMemcpyKind copy_kind(Device dst, Device src) {
  bool to_gpu = dst.type == DeviceType::CUDA, from_gpu = src.type == DeviceType::CUDA;
  if (to_gpu && from_gpu) return cudaMemcpyDeviceToDevice;
  return to_gpu ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost;
}
}  // namespace

CudaBackend& CudaBackend::instance() {
  static CudaBackend* backend = new CudaBackend();
  return *backend;
}

int CudaBackend::device_count() const {
  return cuda_device_count();
}

void CudaBackend::check_device(Device device) const {
  DPRUN_CHECK(device.type == DeviceType::CUDA && device.index >= 0,
              "not a CUDA device: ", device.to_string());
  int count = cuda_device_count();
  if (count == 0) fail("device ", device.to_string(), ": no CUDA GPU is present");
  if (device.index >= count)
    fail("device ", device.to_string(), ": only ", count, " CUDA GPU", count == 1 ? " is" : "s are",
         " present (cuda:0", count == 1 ? "" : "..cuda:" + std::to_string(count - 1), ")");
}

std::shared_ptr<Allocator> CudaBackend::allocator(Device device) {
  check_device(device);
  std::lock_guard lock(mutex_);
  auto& slot = allocators_[device.index];
  if (!slot) slot = std::make_shared<CudaCachingAllocator>(device);
  return slot;
}

std::shared_ptr<Allocator> CudaBackend::pinned_host_allocator() {
  if (device_count() == 0) return nullptr;
  std::lock_guard lock(mutex_);
  if (!pinned_) pinned_ = std::make_shared<CudaPinnedHostAllocator>();
  return pinned_;
}

namespace {
/// Whether host memory at `p` is page-locked (cudaHostAlloc, cudaHostRegister); pageable
/// otherwise.
bool is_page_locked(const void* p) {
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, p) != cudaSuccess) {
    cudaGetLastError();  // clear the error: the pointer is simply not CUDA's
    return false;
  }
  return attributes.type == cudaMemoryTypeHost;
}
}  // namespace

void CudaBackend::copy(void* dst, Device dst_device, const void* src, Device src_device,
                       size_t bytes) {
  if (bytes == 0) return;
  Device gpu = dst_device.type == DeviceType::CUDA ? dst_device : src_device;
  check_device(gpu);
  CudaDeviceGuard guard(gpu.index);
  cudaStream_t stream = current_stream(gpu.index);
  bool peer = dst_device.type == DeviceType::CUDA && src_device.type == DeviceType::CUDA &&
              dst_device.index != src_device.index;
  if (src_device.type != DeviceType::CUDA && stream != nullptr) {
    // A graph would copy from that host memory again at every replay, after it is freed.
    cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
    cuda_check(cudaStreamIsCapturing(stream, &capturing), "cudaStreamIsCapturing");
    DPRUN_CHECK(capturing == cudaStreamCaptureStatusNone || cuda_capture_keeps(gpu.index, src),
                "a copy of ", bytes, " bytes from host memory to ", dst_device.to_string(),
                " inside a CUDA graph capture: each replay would read that host memory again");
  }
  if (peer) {
    check_device(src_device);
    cuda_check(cudaMemcpyPeerAsync(dst, dst_device.index, src, src_device.index, bytes, stream),
               "copy of ", bytes, " bytes from ", src_device.to_string(), " to ",
               dst_device.to_string(), ": cudaMemcpyPeerAsync");
  } else {
    cuda_check(cudaMemcpyAsync(dst, src, bytes, copy_kind(dst_device, src_device), stream),
               "copy of ", bytes, " bytes from ", src_device.to_string(), " to ",
               dst_device.to_string(), ": cudaMemcpyAsync");
  }
  const bool from_host = src_device.type != DeviceType::CUDA;
  const bool to_host = dst_device.type != DeviceType::CUDA;
  // From pageable memory the call returns once the source is staged, so only a copy to the
  // host (which is read next) or from page-locked memory (which the caller may reuse at once)
  // waits; a copy from pageable memory, within a GPU or between GPUs is ordered on the stream
  // like a kernel, its source's stream and later users ordered by events (Tensor's copies,
  // engine/stream_order.h). On the legacy default stream (no context) every copy waits.
  if (to_host || (from_host && is_page_locked(src)) || stream == nullptr)
    cuda_check(cudaStreamSynchronize(stream), "copy of ", bytes, " bytes from ",
               src_device.to_string(), " to ", dst_device.to_string(), ": cudaStreamSynchronize");
}

void CudaBackend::synchronize(Device device) {
  check_device(device);
  CudaDeviceGuard guard(device.index);
  cuda_check(cudaDeviceSynchronize(), device.to_string(), ": cudaDeviceSynchronize");
}

DeviceProperties CudaBackend::properties(Device device, int) const {
  check_device(device);
  cudaDeviceProp prop{};
  cuda_check(cudaGetDeviceProperties(&prop, device.index), device.to_string(),
             ": cudaGetDeviceProperties");
  DeviceProperties p;
  p.name = prop.name;
  p.total_memory = prop.totalGlobalMem;
  p.compute_units = prop.multiProcessorCount;
  return p;
}

std::unique_ptr<ExecutionContext> CudaBackend::create_execution_context(Device device,
                                                                        const ExecutionConfig&) {
  check_device(device);
  return std::make_unique<CudaExecutionContext>(device, streams_);
}

void CudaBackend::broadcast_coalesced(const std::vector<Tensor>& sources,
                                      const std::vector<std::vector<Tensor>>& destinations) {
  nccl_broadcast_coalesced(sources, destinations);
}

void CudaBackend::reduce_add_coalesced(const std::vector<std::vector<Tensor>>& inputs,
                                       const std::vector<Tensor>& outputs) {
  nccl_reduce_add_coalesced(inputs, outputs);
}

std::shared_ptr<const Graph> CudaBackend::rewrite_for_kernels(
    std::shared_ptr<const Graph> graph, const GraphRewriteOptions& options) const {
  if (options.fusion)
    if (std::shared_ptr<const Graph> fused = fuse_ops(*graph, DeviceType::CUDA)) return fused;
  return graph;
}

}  // namespace dprun
