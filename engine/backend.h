#pragma once
// The per-device-type runtime: memory, copies, execution resources and synchronisation. One
// Backend instance per DeviceType, registered at start-up by the backend's own file
// (engine/backends/cpu, engine/backends/cuda where the build has CUDA). Everything above the
// backends (executor, model, parallel/) reaches a device only through this interface; resolving a
// device whose backend this build lacks fails with a clear error.
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "engine/allocator.h"
#include "engine/device.h"
#include "engine/execution_context.h"

namespace dprun {

struct Graph;
class Tensor;

/// What a backend may change in a graph before it is compiled for one of its devices.
struct GraphRewriteOptions {
  /// Rewrites that change data layouts (CPU: the channels-last rewrite of convolution chains).
  bool layout = true;
  /// Rewrites that fuse chains of ops into one kernel (CPU and CUDA: fuse_ops, MatMul with its
  /// bias and the erf form of GELU).
  bool fusion = true;
};

/// What the runtime knows about one device; used to warn about unbalanced device sets.
struct DeviceProperties {
  std::string name;         // "cpu:0"; a GPU's product name
  size_t total_memory = 0;  // bytes; 0 when unknown (CPU virtual devices share host memory)
  int compute_units = 0;    // CPU cores of the share, or GPU multiprocessors
};

/// Runtime of one device type. Thread-safe.
class Backend {
 public:
  virtual ~Backend() = default;
  virtual DeviceType type() const = 0;
  /// Number of physical devices visible (CPU: hardware cores).
  virtual int device_count() const = 0;
  /// Throws Error when `device` cannot be used by this backend (CPU: a negative index).
  virtual void check_device(Device device) const = 0;
  /// The allocator of one device; the same object on every call for that device.
  virtual std::shared_ptr<Allocator> allocator(Device device) = 0;
  /// Host memory that this backend's devices copy to and from by DMA (page-locked memory on
  /// CUDA): the memory of Tensor::pin_memory. nullptr where ordinary host memory does as well
  /// (the CPU backend) or where no device can use it (no GPU).
  virtual std::shared_ptr<Allocator> pinned_host_allocator() { return nullptr; }
  /// Copies bytes; at least one of the two devices belongs to this backend. Synchronous
  /// with respect to the host when either side is host memory, except that a copy from
  /// pageable host memory to a device whose execution context is current on the calling thread
  /// returns once the source is read, the copy ordered before that context's later work (CUDA).
  virtual void copy(void* dst, Device dst_device, const void* src, Device src_device,
                    size_t bytes) = 0;
  /// Waits until all work queued on the device is done.
  virtual void synchronize(Device device) = 0;
  /// The capacity of `device` when `device_count` devices of this type work side by side (CPU
  /// virtual devices split the cores between them; a GPU's capacity does not depend on it).
  /// Throws Error when the device cannot be used.
  virtual DeviceProperties properties(Device device, int device_count) const = 0;
  /// Creates the execution resource for running work for `device` on the calling thread (see
  /// engine/execution_context.h): CPU, the thread's intra-op team, pinned to the device's core
  /// share when config.device_count > 0; GPU, a stream with its library handles, the device made
  /// current. The context must be used and destroyed on the calling thread. Throws Error when
  /// the device cannot be used.
  virtual std::unique_ptr<ExecutionContext> create_execution_context(
      Device device, const ExecutionConfig& config) = 0;
  /// This backend's own rewrites, whose new nodes it has kernels for (CPU: fuse_ops, then
  /// rewrite_channels_last; CUDA and the simulated devices: fuse_ops;
  /// engine/rewrites/op_fusion.h, engine/backends/cpu/layout_rewrite.h). This default returns
  /// `graph`. What a model compiles is rewrite_for_device's (engine/rewrites/device_rewrites.h):
  /// these, then the float32 fallback every backend shares.
  virtual std::shared_ptr<const Graph> rewrite_for_kernels(
      std::shared_ptr<const Graph> graph, const GraphRewriteOptions& options) const;

  // Device collectives: the seam under engine/parallel/comm.h (torch.nn.parallel.comm) for
  // devices that do not share host memory. Both are coalesced: every tensor of the call moves
  // in one collective operation. Each returns when its results are complete, and is ordered
  // after the work queued on the calling thread's current stream of every device involved.
  // Tensors are whole (contiguous) and on devices of this backend. The CPU backend has none:
  // CPU devices share host memory, and comm.h copies and sums there itself, split over the
  // devices' workers. These defaults throw Error saying the backend has no collectives.

  /// Copies sources[k] into destinations[d][k] for every d and k. The sources are on one
  /// device; each destinations[d] is a list on one other device, every list's devices
  /// distinct, with the sources' shapes and dtypes. Any dtype of fixed size (the bytes are
  /// copied); throws Error for string tensors.
  virtual void broadcast_coalesced(const std::vector<Tensor>& sources,
                                   const std::vector<std::vector<Tensor>>& destinations);
  /// Sums inputs[0][k] + inputs[1][k] + ... into outputs[k]. Each inputs[d] is a list on one
  /// device, the devices distinct, every list with the same shapes and dtypes in the same
  /// order; the outputs (same shapes and dtypes) are all on the device of one of the input
  /// lists. The order of the additions is the backend's (see its header): a result may differ
  /// in rounding from a left-to-right sum. Throws Error naming the dtype when the backend
  /// cannot sum it.
  virtual void reduce_add_coalesced(const std::vector<std::vector<Tensor>>& inputs,
                                    const std::vector<Tensor>& outputs);
};

/// The backend of a device type, opening the CUDA plugin (engine/cuda_plugin.h) the first time
/// CUDA's is asked for. Throws Error when this build has none for it ("this build of dprun has
/// no CUDA support") or the plugin cannot be loaded ("the CUDA backend DIR/libdprun_cuda.so
/// cannot be loaded: libcudnn.so.9: cannot open shared object file: ...").
Backend& backend_for(DeviceType type);
/// The backend of `device`'s type; throws Error as backend_for(type) does, naming the device
/// ("device cuda:0: this build of dprun has no CUDA support").
Backend& backend_for(Device device);
/// True when the backend of `type` is in this build and has at least one device. For CUDA the
/// plugin is opened only when the driver reports a GPU (driver_gpu_count), so that asking on a
/// machine without one maps no CUDA library.
bool backend_available(DeviceType type);
/// Installs a backend (called by each backend's registrar at static-init time).
void register_backend(DeviceType type, Backend* backend);
/// Copies bytes between any two devices, routing through the right backend.
void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes);

}  // namespace dprun
