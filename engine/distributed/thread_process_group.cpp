#include "engine/distributed/thread_process_group.h"

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>

namespace dprun {

namespace {

using Clock = std::chrono::steady_clock;
using Bytes = std::vector<uint8_t>;

// One collective: every rank's contribution, until every rank has read what it needs.
struct Slot {
  std::vector<Bytes> parts;
  int arrived = 0;
  int released = 0;
};

enum Channel { kReduce = 0, kControl = 1 };

// What the ranks of one job share.
class Hub {
 public:
  Hub(int size, double timeout) : size_(size), timeout_(timeout) {}

  int size() const { return size_; }

  void contribute(Channel channel, uint64_t seq, int rank, Bytes bytes) {
    std::lock_guard lock(mutex_);
    Slot& slot = slots_[{channel, seq}];
    slot.parts.resize(static_cast<size_t>(size_));
    slot.parts[static_cast<size_t>(rank)] = std::move(bytes);
    if (++slot.arrived == size_) ready_.notify_all();
  }

  /// True (and `read` called with every part) once every rank contributed; with `block`, waits
  /// for that up to the timeout. The slot is released for this rank when `read` has run.
  template <class Read>
  bool take(Channel channel, uint64_t seq, bool block, const char* what, Read read) {
    std::unique_lock lock(mutex_);
    auto key = std::make_pair(static_cast<int>(channel), seq);
    auto complete = [&] { return slots_[key].arrived == size_; };
    if (!complete()) {
      if (!block) return false;
      auto deadline = Clock::now() + std::chrono::duration<double>(timeout_);
      if (!ready_.wait_until(lock, deadline, complete))
        fail(what, ": the other ranks did not join within ", timeout_, " s");
    }
    Slot& slot = slots_[key];
    read(slot.parts);
    release_locked(key);
    return true;
  }

  /// For a rank that needs nothing back (gather on a non-root rank).
  void release(Channel channel, uint64_t seq) {
    std::lock_guard lock(mutex_);
    release_locked({static_cast<int>(channel), seq});
  }

 private:
  void release_locked(const std::pair<int, uint64_t>& key) {
    Slot& slot = slots_[key];
    if (++slot.released == size_) slots_.erase(key);
  }

  const int size_;
  const double timeout_;
  std::mutex mutex_;
  std::condition_variable ready_;
  std::map<std::pair<int, uint64_t>, Slot> slots_;
};

Bytes bytes_of(const Tensor& t) {
  if (t.device().type != DeviceType::CPU) return bytes_of(t.to(Device::cpu()));
  const auto* p = static_cast<const uint8_t*>(t.raw_data());
  return Bytes(p, p + t.nbytes());
}

// Writes `t` on the host: `fill` writes host memory of t's size, t's own when t is in host
// memory, else a staging buffer that is then copied to t's device.
template <class Fill>
void write_on_host(Tensor& t, Fill fill) {
  if (t.device().type == DeviceType::CPU) return fill(t.raw_data());
  Tensor host = Tensor::empty(t.shape(), t.dtype());
  fill(host.raw_data());
  t.copy_from(host);
}

class ThreadReduceWork : public CollectiveWork {
 public:
  ThreadReduceWork(std::shared_ptr<Hub> hub, uint64_t seq, Tensor tensor)
      : hub_(std::move(hub)), seq_(seq), tensor_(std::move(tensor)) {}
  bool test() override { return done_ || finish(false); }
  void wait() override {
    if (!done_) finish(true);
  }

 private:
  bool finish(bool block) {
    done_ =
        hub_->take(kReduce, seq_, block, "all_reduce_sum", [&](const std::vector<Bytes>& parts) {
          for (size_t r = 0; r < parts.size(); ++r)
            DPRUN_CHECK(parts[r].size() == tensor_.nbytes(), "all_reduce_sum: rank ", r, " gave ",
                        parts[r].size(), " bytes but this rank gave ", tensor_.nbytes());
          // Rank order: start from rank 0's values and add each following rank's.
          write_on_host(tensor_, [&](void* sum) {
            std::memcpy(sum, parts[0].data(), parts[0].size());
            for (size_t r = 1; r < parts.size(); ++r)
              add_in_place(sum, parts[r].data(), tensor_.numel(), tensor_.dtype());
          });
        });
    return done_;
  }

  std::shared_ptr<Hub> hub_;
  uint64_t seq_;
  Tensor tensor_;
  bool done_ = false;
};

class ThreadGroup : public ProcessGroup {
 public:
  ThreadGroup(std::shared_ptr<Hub> hub, int rank, Device reduce_device)
      : hub_(std::move(hub)), rank_(rank), reduce_device_(reduce_device) {}

  int rank() const override { return rank_; }
  int size() const override { return hub_->size(); }
  std::string backend() const override { return "threads"; }
  Device reduce_device() const override { return reduce_device_; }

  std::unique_ptr<CollectiveWork> all_reduce_sum(Tensor tensor, ReduceOrder) override {
    check_all_reducible(tensor);
    DPRUN_CHECK(tensor.device() == reduce_device_, "all_reduce_sum: the tensor must be in ",
                reduce_device_.type == DeviceType::CPU ? std::string("host")
                                                       : reduce_device_.to_string() + "'s",
                " memory, not ", tensor.describe());
    uint64_t seq = reduce_seq_++;
    hub_->contribute(kReduce, seq, rank_, bytes_of(tensor));
    return std::make_unique<ThreadReduceWork>(hub_, seq, std::move(tensor));
  }

  void broadcast(Tensor tensor, int root) override {
    check_root(root, "broadcast");
    DPRUN_CHECK(tensor.device().type == DeviceType::CPU || tensor.device() == reduce_device_,
                "broadcast: the tensor must be in host memory or ", reduce_device_.to_string(),
                "'s, not ", tensor.describe());
    uint64_t seq = control_seq_++;
    hub_->contribute(kControl, seq, rank_, rank_ == root ? bytes_of(tensor) : Bytes{});
    hub_->take(kControl, seq, true, "broadcast", [&](const std::vector<Bytes>& parts) {
      const Bytes& from = parts[static_cast<size_t>(root)];
      DPRUN_CHECK(from.size() == tensor.nbytes(), "broadcast: rank ", root, " sent ", from.size(),
                  " bytes but this rank expects ", tensor.nbytes());
      if (rank_ != root)
        write_on_host(tensor, [&](void* to) { std::memcpy(to, from.data(), from.size()); });
    });
  }

  std::vector<uint8_t> all_gather(std::span<const uint8_t> bytes) override {
    uint64_t seq = control_seq_++;
    hub_->contribute(kControl, seq, rank_, Bytes(bytes.begin(), bytes.end()));
    Bytes out;
    hub_->take(kControl, seq, true, "all_gather", [&](const std::vector<Bytes>& parts) {
      for (size_t r = 0; r < parts.size(); ++r) {
        DPRUN_CHECK(parts[r].size() == bytes.size(), "all_gather: rank ", r, " gave ",
                    parts[r].size(), " bytes but this rank gave ", bytes.size());
        out.insert(out.end(), parts[r].begin(), parts[r].end());
      }
    });
    return out;
  }

  std::vector<std::vector<uint8_t>> gather(std::span<const uint8_t> bytes, int root) override {
    check_root(root, "gather");
    uint64_t seq = control_seq_++;
    hub_->contribute(kControl, seq, rank_, Bytes(bytes.begin(), bytes.end()));
    std::vector<Bytes> out;
    if (rank_ != root) {
      hub_->release(kControl, seq);
      return out;
    }
    hub_->take(kControl, seq, true, "gather",
               [&](const std::vector<Bytes>& parts) { out = parts; });
    return out;
  }

  void barrier() override { all_gather({}); }

  [[noreturn]] void abort(int exit_code) override {
    std::fflush(nullptr);
    std::_Exit(exit_code);
  }

 private:
  void check_root(int root, const char* what) const {
    DPRUN_CHECK(root >= 0 && root < size(), what, ": root ", root, " is not a rank of a group of ",
                size());
  }

  std::shared_ptr<Hub> hub_;
  int rank_;
  Device reduce_device_;
  uint64_t reduce_seq_ = 0, control_seq_ = 0;
};

}  // namespace

std::vector<std::shared_ptr<ProcessGroup>> make_thread_process_groups(
    int size, ProcessGroupOptions options, std::vector<Device> reduce_devices) {
  DPRUN_CHECK(size >= 1, "a process group needs at least one rank, not ", size);
  DPRUN_CHECK(reduce_devices.empty() || reduce_devices.size() == static_cast<size_t>(size),
              "a process group of ", size, " ranks given ", reduce_devices.size(),
              " devices to sum in");
  auto hub = std::make_shared<Hub>(size, options.timeout_seconds);
  std::vector<std::shared_ptr<ProcessGroup>> groups;
  for (int r = 0; r < size; ++r)
    groups.push_back(std::make_shared<ThreadGroup>(
        hub, r, reduce_devices.empty() ? Device::cpu() : reduce_devices[static_cast<size_t>(r)]));
  return groups;
}

}  // namespace dprun
