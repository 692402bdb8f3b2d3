#pragma once
// The simulated devices sim:0, sim:1, ...: accelerators made of host memory, for testing on
// machines without a GPU the paths that a GPU takes through the engine. A plan for a sim
// device is the plan a CUDA GPU would get: the same graph rewrites (op fusion) and a kernel for
// exactly the ops, dtypes and nodes the CUDA backend's definitions take (ops/cuda/defs,
// compiled in every build; ops/sim/sim_kernels.cpp), each computing with the op's CPU kernel;
// every other node falls back to the host, and shape arithmetic runs there. Its memory
// (sim_memory.h) is unreadable to the host except through the device, and its kernels fail on an
// input that is not in their device's memory, so a missing or extra copy in the executor, the
// parallel layer or the trainer fails a test here instead of on a GPU. The devices share nothing
// but their collectives, which copy and sum on the host as NCCL would on GPUs. Copies and kernels
// finish before they return, but each is booked on a stream, and work that relies on work of
// another stream that the host has not waited for fails (sim_streams.h): the ordering faults of
// asynchronous execution. Not simulated: device-specific numerics (results are the CPU
// kernels').
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>

#include "engine/backend.h"
#include "engine/backends/sim/sim_memory.h"

namespace dprun {

/// Copies the simulated devices have made since the process started, by direction: what a GPU
/// would move over its links. Counts every copy through SimBackend::copy (collectives apart).
struct SimTraffic {
  struct Count {
    int64_t copies = 0;
    int64_t bytes = 0;
  };
  Count host_to_device, device_to_host, within_device, between_devices;
};

class SimBackend : public Backend {
 public:
  static SimBackend& instance();
  DeviceType type() const override { return DeviceType::Sim; }
  /// As many as the CPU backend has devices; any non-negative index can be used.
  int device_count() const override;
  void check_device(Device device) const override;
  /// The device's SimMemory.
  std::shared_ptr<Allocator> allocator(Device device) override;
  /// memcpy with the source and destination opened on the simulated side(s), booked on a
  /// stream as the CUDA backend queues the copy and waited for where it waits (sim_streams.h).
  void copy(void* dst, Device dst_device, const void* src, Device src_device,
            size_t bytes) override;
  /// The host has waited for every stream of `device`.
  void synchronize(Device device) override;
  /// The copies made so far.
  SimTraffic traffic() const;
  /// Named "sim:N", with the compute units of the CPU share of the same index.
  DeviceProperties properties(Device device, int device_count) const override;
  /// A CPU execution context for the threads, reporting `device`.
  std::unique_ptr<ExecutionContext> create_execution_context(
      Device device, const ExecutionConfig& config) override;
  /// Checks the lists as NCCL needs them (one device per list, distinct devices, like shapes
  /// and dtypes) and copies every byte.
  void broadcast_coalesced(const std::vector<Tensor>& sources,
                           const std::vector<std::vector<Tensor>>& destinations) override;
  /// Checks the lists likewise and sums on the host in list order; float32, float64, int32
  /// and int64.
  void reduce_add_coalesced(const std::vector<std::vector<Tensor>>& inputs,
                            const std::vector<Tensor>& outputs) override;

 protected:
  /// What the CUDA backend does: fuse_ops when options.fusion.
  std::shared_ptr<const Graph> rewrite_for_kernels(
      std::shared_ptr<const Graph> graph, const GraphRewriteOptions& options) const override;

 private:
  void count(SimTraffic::Count& direction, size_t bytes);

  std::mutex mutex_;
  std::map<int, std::shared_ptr<SimMemory>> memories_;
  mutable std::mutex traffic_mutex_;
  SimTraffic traffic_;
};

}  // namespace dprun
