#pragma once
// ReplicaGroup: collectives between the replicas of one parallel_apply call, for nodes that
// combine values across a split batch (AllReduceSum, which synchronized BatchNormalization is
// built from: engine/autograd/sync_batch_norm.h). parallel_apply makes one group per call
// and hands replica i its member through RunOptions; a kernel reaches it through
// KernelContext::replicas().
//
// A collective is matched across the replicas by its key (the node's output name). Every
// replica must reach the collectives in one order, as replicas running one graph in its node
// order do. No replica hangs: a replica that fails, or that finishes its run without taking
// part in a collective the others wait in, ends their wait with an Error naming it, and so do
// replicas that all wait, each in a collective another has not reached.
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "engine/tensor.h"

namespace dprun {

class ReplicaGroup {
 public:
  explicit ReplicaGroup(size_t size);

  size_t size() const { return size_; }

  /// The elementwise sum of every replica's `tensor` (host tensors of one shape and dtype,
  /// float32 or float64) for the collective `key`, added in replica order: every replica gets
  /// the same bits, whatever the timing. Blocks until every replica has contributed. Throws
  /// Error when the tensors disagree, or when a replica fails or leaves first.
  Tensor all_reduce_sum(size_t replica, const std::string& key, const Tensor& tensor);

  /// Replica `replica` takes part in nothing more: it `failed`, or finished its run. Every
  /// collective still waiting for it ends with an Error naming it.
  void leave(size_t replica, bool failed);

 private:
  struct Collective {
    std::vector<std::optional<Tensor>> parts;
    size_t arrived = 0;
    Tensor sum;
    std::string error;               // set when the parts disagree
    std::atomic<bool> done = false;  // sum or error set: what a polling replica watches
  };

  /// Why `c` can never complete, or empty: a replica that left without contributing.
  std::string abandoned(const Collective& c) const;
  /// Why no waiting replica can go on, or empty: every replica still here waits, and not all
  /// in one collective.
  std::string deadlock() const;

  const size_t size_;
  const bool may_poll_;  // a core for every replica: a waiting replica polls before it sleeps
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::string, Collective> collectives_;
  std::map<size_t, bool> left_;            // replica -> failed
  std::map<size_t, std::string> waiting_;  // replica -> the key of the collective it waits in
  std::string deadlocked_;                 // deadlock() once it was found
};

}  // namespace dprun
