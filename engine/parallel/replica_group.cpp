#include "engine/parallel/replica_group.h"

#include <algorithm>
#include <thread>

#include "engine/error.h"
#include "engine/spin_wait.h"

namespace dprun {

namespace {

// parts[0] + parts[1] + ... in that order, elementwise, in a new host tensor.
Tensor sum_in_order(const std::vector<Tensor>& parts) {
  const Tensor& first = parts[0];
  for (size_t r = 0; r < parts.size(); ++r) {
    const Tensor& t = parts[r];
    DPRUN_CHECK(t.device().type == DeviceType::CPU, "replica ", r, "'s tensor is on ",
                t.device().to_string(), ", not in host memory");
    DPRUN_CHECK(t.dtype() == DType::Float32 || t.dtype() == DType::Float64, "replica ", r, "'s ",
                t.describe(), " is not float32 or float64");
    DPRUN_CHECK(t.dtype() == first.dtype() && t.shape() == first.shape(), "replica ", r, "'s ",
                t.describe(), " differs from replica 0's ", first.describe());
  }
  Tensor sum = first.clone();
  visit_dtype_among<float, double>(sum.dtype(), [&](auto zero) {
    using T = decltype(zero);
    T* out = sum.data<T>();
    for (size_t r = 1; r < parts.size(); ++r) {
      const T* in = parts[r].data<T>();
      for (int64_t i = 0; i < sum.numel(); ++i) out[i] += in[i];
    }
  });
  return sum;
}

}  // namespace

ReplicaGroup::ReplicaGroup(size_t size)
    : size_(size), may_poll_(size <= std::max(1u, std::thread::hardware_concurrency())) {
  DPRUN_CHECK(size > 0, "a replica group needs at least one replica");
}

std::string ReplicaGroup::abandoned(const Collective& c) const {
  for (const auto& [replica, failed] : left_)
    if (!c.parts[replica])
      return "replica " + std::to_string(replica) +
             (failed ? " failed" : " finished its run without taking part");
  return "";
}

std::string ReplicaGroup::deadlock() const {
  // Replicas stuck in a collective that is not complete; a replica whose collective completed
  // is about to move on.
  std::map<size_t, std::string> stuck;
  for (const auto& [replica, key] : waiting_)
    if (collectives_.at(key).arrived < size_) stuck[replica] = key;
  if (stuck.size() + left_.size() < size_) return "";
  std::string places;
  bool apart = false;
  for (const auto& [replica, key] : stuck) {
    apart = apart || key != stuck.begin()->second;
    places += (places.empty() ? "" : ", ") + std::string("replica ") + std::to_string(replica) +
              " in '" + key + "'";
  }
  return apart ? "the replicas wait in different sums (" + places + ")" : "";
}

Tensor ReplicaGroup::all_reduce_sum(size_t replica, const std::string& key, const Tensor& tensor) {
  DPRUN_CHECK(replica < size_, "replica ", replica, " of a group of ", size_);
  std::unique_lock lock(mutex_);
  Collective& c = collectives_[key];
  if (c.parts.empty()) c.parts.resize(size_);
  DPRUN_CHECK(!c.parts[replica], "replica ", replica, " took part in '", key, "' twice");
  c.parts[replica] = tensor;
  if (++c.arrived == size_) {
    std::vector<Tensor> parts;
    for (const auto& part : c.parts) parts.push_back(*part);
    try {
      c.sum = sum_in_order(parts);
    } catch (const Error& e) {
      c.error = e.what();
    }
    c.done.store(true, std::memory_order_release);
    changed_.notify_all();
  }
  waiting_[replica] = key;
  changed_.notify_all();  // the others may now see that every replica waits
  if (!c.done.load(std::memory_order_relaxed) && may_poll_) {
    lock.unlock();  // the replicas still to come need the lock to contribute
    spin_until([&] { return c.done.load(std::memory_order_acquire); });
    lock.lock();
  }
  changed_.wait(lock, [&] {
    if (c.arrived == size_) return true;
    // Once found, a deadlock stops every replica in it, also those that see it later.
    if (deadlocked_.empty()) deadlocked_ = deadlock();
    return !deadlocked_.empty() || !abandoned(c).empty();
  });
  waiting_.erase(replica);
  if (c.arrived < size_) {
    const std::string why = abandoned(c);
    fail("the sum over the replicas stopped: ", why.empty() ? deadlocked_ : why);
  }
  if (!c.error.empty()) fail("the sum over the replicas: ", c.error);
  return c.sum;
}

void ReplicaGroup::leave(size_t replica, bool failed) {
  std::lock_guard lock(mutex_);
  left_[replica] = failed;
  changed_.notify_all();
}

}  // namespace dprun
