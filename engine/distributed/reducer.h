#pragma once
// Reducer: a model's gradients summed over the ranks of a process group in buckets, each
// bucket's all-reduce started as soon as all of its gradients are final (the Reducer behind
// torch's DistributedDataParallel).
//
// Gradients are laid out in buckets of at most `bucket_bytes` (one dtype per bucket; a gradient
// larger than that gets a bucket of its own), in the order the backward pass produces them.
// mark_ready() copies a gradient into its bucket; once every gradient of the next bucket is in,
// that bucket's all-reduce starts. Buckets start strictly in bucket order, the same on every
// rank, as the process group's matching rule requires: a bucket that fills early waits for the
// buckets before it.
#include <cstdint>
#include <memory>
#include <vector>

#include "engine/distributed/process_group.h"

namespace dprun {

struct GradientLayout {
  Shape shape;
  DType dtype = DType::Float32;  // float32 or float64
};

struct ReducerOptions {
  /// Largest bucket, in bytes: PyTorch's bucket_cap_mb of 25 MiB.
  size_t bucket_bytes = size_t(25) << 20;
  ReduceOrder order = ReduceOrder::Any;
  /// Float32: buckets are summed as they are. Float16 or BFloat16: float32 buckets travel and
  /// are summed in that type (bucket_cast.h; each partial sum rounded to 16 bits), half the
  /// bytes, and are widened back when the sum is in.
  DType wire_dtype = DType::Float32;
};

class Reducer {
 public:
  /// `ready_order` lists the gradients' indices in the order the backward pass produces them
  /// (a permutation of 0 .. gradients.size()-1); the buckets follow it. Throws Error when it is
  /// not a permutation or a dtype is not float32 or float64.
  Reducer(std::shared_ptr<ProcessGroup> group, std::vector<GradientLayout> gradients,
          const std::vector<size_t>& ready_order, ReducerOptions options = {});

  /// Starts a step: no gradient is ready and no bucket started. Throws Error when the previous
  /// step's buckets were started but not waited for.
  void begin_step();
  /// Gradient `i` is final: copies `gradient` (the layout's dtype and element count) into its
  /// bucket, and starts every bucket that is now complete, in bucket order. A gradient already
  /// marked in this step is left as it is. Buckets live where the group sums
  /// (ProcessGroup::reduce_device). For a group that sums host memory, a bucket whose first
  /// gradient of the step is on a device is gathered in a copy of the bucket on that device
  /// instead (no wait there; it moves to the host in one copy when complete, and back in one
  /// after the sum).
  void mark_ready(size_t i, const Tensor& gradient);
  bool is_ready(size_t i) const { return ready_[i]; }
  /// Advances the started all-reduces without blocking: MPI moves a nonblocking collective on
  /// only inside its own calls, so the backward pass calls this between its nodes.
  void progress();
  /// Sets every gradient not marked in this step to zero and starts every bucket not started
  /// yet. Call after the local backward pass, also when this rank had no rows or failed: every
  /// rank must start every bucket.
  void finish_marking();
  /// Waits until every bucket is summed (after finish_marking). Throws Error on a timeout.
  void wait();

  /// Gradient i as a view into its bucket (in the group's memory, or, for a host group, where
  /// the bucket's gradients were given): after wait(), the sum over the ranks.
  const std::vector<Tensor>& gradients() const { return results_; }
  size_t bucket_count() const { return buckets_.size(); }
  /// Bytes all-reduced per step: every gradient's size, in the wire dtype where compressed.
  int64_t bytes_per_step() const { return bytes_; }

 private:
  struct Bucket {
    Tensor flat;              // the gradients, in the process group's reduce_device()'s memory
    Tensor wire;              // this step's 16-bit copy of `flat` that the group sums, if any
    Tensor staged;            // the bucket on a device, kept from step to step
    Device device;            // where this step's gradients are gathered: the first one's device
    bool compressed = false;  // summed in options_.wire_dtype
    bool gathering = false;   // `device` is set for this step
    size_t pending = 0;       // gradients of the bucket not yet marked in this step
    size_t members = 0;
    std::unique_ptr<CollectiveWork> work;
    bool done = false;
    // Whether this step's gradients are gathered in `staged`, on a device, for a host group.
    bool staged_this_step() const {
      return gathering && device.type != DeviceType::CPU && flat.device() != device;
    }
  };
  void start_complete_buckets();
  // Where gradient i of this step goes: its view of `flat`, or, for a host group, its view of
  // the bucket's device copy (made on first use, for `device`).
  Tensor& target_of(size_t i, Device device);

  std::shared_ptr<ProcessGroup> group_;
  ReducerOptions options_;
  std::vector<Bucket> buckets_;
  std::vector<size_t> bucket_of_;
  std::vector<Tensor> views_;         // gradient i in its bucket's `flat`
  std::vector<Tensor> staged_views_;  // gradient i in its bucket's device copy, once made
  std::vector<int64_t> offsets_;      // gradient i's first element in its bucket
  std::vector<Tensor> results_;       // what gradients() gives
  std::vector<bool> ready_;
  size_t next_ = 0;  // first bucket not started in this step
  int64_t bytes_ = 0;
};

}  // namespace dprun
