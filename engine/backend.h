#pragma once
// The per-device-type runtime: memory, copies and synchronisation. One Backend instance per
// DeviceType, registered at start-up by the backend's own file. This build has one backend,
// CPU (engine/backends/cpu). The interface is the seam a GPU backend would plug into:
// DeviceType already names CUDA and device lists parse cuda:N, but no CUDA backend exists
// yet, so resolving a CUDA device fails with a clear error.
#include <cstddef>
#include <memory>
#include <string>

#include "engine/allocator.h"
#include "engine/device.h"

namespace dprun {

/// What the runtime knows about one device; used to warn about unbalanced device sets.
struct DeviceProperties {
  std::string name;
  size_t total_memory = 0;  // bytes; 0 when unknown
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
  /// Copies bytes; at least one of the two devices belongs to this backend. Synchronous
  /// with respect to the host when either side is host memory.
  virtual void copy(void* dst, Device dst_device, const void* src, Device src_device,
                    size_t bytes) = 0;
  /// Waits until all work queued on the device is done.
  virtual void synchronize(Device device) = 0;
  virtual DeviceProperties properties(Device device) const = 0;
  /// Prepares the calling thread to run work for `device` when `device_count` devices of this
  /// type work side by side (CPU: pin to the device's core share and set its intra-op
  /// threads, `threads` or the share's size when 0; a GPU backend would make its device
  /// current here).
  /// Returns the intra-op thread count the thread will use.
  virtual int prepare_worker_thread(Device device, int device_count, int threads) = 0;
};

/// The backend of a device type; throws Error when this build has none for it ("this build
/// of dprun has no CUDA support").
Backend& backend_for(DeviceType type);
/// The backend of `device`'s type; throws Error naming the device when this build has none
/// ("device cuda:0: this build of dprun has no CUDA support").
Backend& backend_for(Device device);
/// True when the backend of `type` is compiled in and has at least one device.
bool backend_available(DeviceType type);
/// Installs a backend (called by each backend's registrar at static-init time).
void register_backend(DeviceType type, Backend* backend);
/// Copies bytes between any two devices, routing through the right backend.
void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes);

}  // namespace dprun
