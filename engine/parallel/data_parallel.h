#pragma once
// DataParallel: PyTorch nn.DataParallel semantics for a Model, plus what dprun adds
// (replica caching, per-input split rules, even/weighted chunking, full error reports).
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "engine/model.h"
#include "engine/parallel/parallel_apply.h"
#include "engine/parallel/scatter.h"

namespace dprun {

struct DataParallelOptions {
  /// Devices to use; empty means run the base model directly. Use all_devices() for "all".
  std::vector<Device> device_ids;
  /// Where outputs are gathered; defaults to device_ids[0].
  std::optional<Device> output_device;
  /// Split and gather dim; negative counts from the end of each tensor.
  int64_t dim = 0;
  SplitPolicy split_policy = SplitPolicy::Chunk;
  /// Weighted policy: one positive weight per device. Empty: measured on the first call.
  std::vector<double> weights;
  /// Per-input rules by input name (split along a dim, broadcast whole, or share of rows).
  std::map<std::string, InputSplit> input_splits;
  /// Outputs summed over the replicas on the output device (reduce_add_coalesced: in device
  /// order on CPU devices, one NCCL reduce on GPUs) instead of concatenated along `dim`:
  /// losses and gradients in training.
  std::set<std::string> summed_outputs;
  /// Intra-op threads per device; 0 = the device's core share.
  int threads = 0;
  /// Copy parameters to replicas again only when the base's version changed (true), or on
  /// every call as PyTorch does (false).
  bool cache_replicas = true;
  std::vector<NodeObserver> observers;
};

/// What the last forward() did, for reports and tests.
struct DataParallelRun {
  std::vector<Device> devices_used;
  std::vector<int64_t> chunk_rows;
  std::vector<ReplicaTiming> timings;
  bool replicated = false;  // parameters were copied to replicas during this call
  double scatter_seconds = 0, replicate_seconds = 0, apply_seconds = 0, gather_seconds = 0;
};

/// Thread safety: forward() may be called from several threads; calls are serialized (the
/// replicas, device workers and per-device memory are shared by all calls), so concurrency
/// comes from the devices, not from overlapping calls.
class DataParallel {
 public:
  /// Throws Error when a device is unusable or the model's parameters are not on
  /// device_ids[0] ("model must have its parameters on device cpu:0 (device_ids[0]) but found
  /// one of them on device: cpu:1"). Warns when the devices are strongly unequal.
  DataParallel(std::shared_ptr<Model> module, DataParallelOptions options);

  /// Scatters `inputs` (in module().input_names() order), runs the replicas concurrently
  /// and gathers the outputs on the output device. Errors name the failing replicas.
  std::vector<Tensor> forward(const std::vector<Tensor>& inputs);
  /// The seed of the random ops (Dropout in training mode, ...) of the calls that follow:
  /// replica i draws from stream i of it (derive_seed), on one device and without devices
  /// too, so a call with the same seed, inputs and devices repeats. nullopt (the default):
  /// fresh entropy on every call.
  void set_random_seed(std::optional<uint64_t> seed) { random_seed_ = seed; }
  /// forward() without the gather: the outputs of every replica that ran, in
  /// last_run().devices_used order, where the replica left them. With no devices or one, a
  /// single list.
  std::vector<std::vector<Tensor>> forward_per_replica(const std::vector<Tensor>& inputs);

  /// The replicas, replicas()[i] on device_ids[i] (replica 0 shares the module's parameter
  /// storage); empty until the first call on more than one device.
  std::vector<std::shared_ptr<Model>> replicas() const;
  /// Records every replica as holding the module's current parameters: for a caller that
  /// wrote the new values into replicas()' parameters itself (Trainer fuses this copy with the
  /// optimizer update), so the next call does not copy them again.
  void mark_replicas_current();

  Model& module() { return *module_; }
  const DataParallelOptions& options() const { return options_; }
  Device output_device() const;
  /// A copy of the last run's report.
  DataParallelRun last_run() const;

 private:
  /// The replicas of `devices` (in that order), created on first use and refreshed when the
  /// base's parameters changed since they were last copied.
  std::vector<std::shared_ptr<Model>> ensure_replicas(const std::vector<Device>& devices,
                                                      DataParallelRun& run);
  std::vector<double> measure_weights(const std::vector<Tensor>& inputs);
  /// Scatter, replicas and parallel_apply (mutex_ held); fills `run` but for gather timings.
  std::vector<std::vector<Tensor>> run_replicas(const std::vector<Tensor>& inputs,
                                                DataParallelRun& run);
  /// gather() for the concatenated outputs, reduce_add() for options_.summed_outputs.
  std::vector<Tensor> gather_or_sum(const std::vector<std::vector<Tensor>>& outputs) const;
  /// Fails naming the input when a split dim the model declares with a fixed size does not get
  /// exactly that size on every device of `parts`.
  void check_split_dims_fit(const std::vector<InputSplit>& splits,
                            const std::vector<std::string>& names,
                            const ScatterResult& parts) const;

  std::shared_ptr<Model> module_;
  DataParallelOptions options_;
  std::optional<uint64_t> random_seed_;
  mutable std::mutex mutex_;
  std::vector<std::shared_ptr<Model>> replicas_;
  std::vector<uint64_t> replica_versions_;
  DataParallelRun last_run_;
};

/// A device's capacity as DataParallel compares it: CPU cores of its share (or GPU
/// multiprocessors) and memory (0 when not applicable).
struct DeviceCapacity {
  Device device;
  double compute_units = 0;
  double memory_bytes = 0;
};

/// The warning DataParallel gives when one device has less than 75% of the compute units or
/// memory of the largest (PyTorch's rule), or nullopt when they are balanced.
std::optional<std::string> imbalance_warning(const std::vector<DeviceCapacity>& devices);

/// The functional form (torch.nn.parallel.data_parallel): replicate, scatter, parallel_apply
/// and gather in one call, with no caching. Empty device_ids runs the model directly.
std::vector<Tensor> data_parallel(const Model& module, const std::vector<Tensor>& inputs,
                                  const std::vector<Device>& device_ids,
                                  std::optional<Device> output_device = std::nullopt,
                                  int64_t dim = 0);

}  // namespace dprun
