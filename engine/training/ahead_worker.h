#pragma once
// A thread that makes one value ahead of the one who waits for it: the next step's batches
// while a step runs. One thread for the worker's life, so a step pays no thread start (tens of
// microseconds, the whole step of a small model).
//
//   AheadWorker<Step> ahead([&](int64_t k) { return batches_of(k); });
//   ahead.request(0);
//   for (k = 0; ...) { Step s = ahead.take(); ahead.request(k + 1); run(s); }
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

namespace dprun {

template <class T>
class AheadWorker {
 public:
  explicit AheadWorker(std::function<T(int64_t)> make)
      : make_(std::move(make)), thread_([this] { serve(); }) {}
  AheadWorker(const AheadWorker&) = delete;
  AheadWorker& operator=(const AheadWorker&) = delete;
  /// Waits for a value being made, then ends the thread.
  ~AheadWorker() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    changed_.notify_all();
    thread_.join();
  }

  /// Starts making make(k) on the worker's thread. At most one request is outstanding: call
  /// take() before the next.
  void request(int64_t k) {
    {
      std::lock_guard lock(mutex_);
      requested_ = k;
    }
    changed_.notify_all();
  }

  /// Whether the requested value is made (or make threw): take() would not wait.
  bool ready() {
    std::lock_guard lock(mutex_);
    return made_.has_value() || error_ != nullptr;
  }

  /// Waits for the requested value and returns it; rethrows what make threw.
  T take() {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [this] { return made_.has_value() || error_ != nullptr; });
    if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
    return *std::exchange(made_, std::nullopt);
  }

 private:
  void serve() {
    std::unique_lock lock(mutex_);
    while (true) {
      changed_.wait(lock, [this] { return stopping_ || requested_.has_value(); });
      if (stopping_) return;
      const int64_t k = *std::exchange(requested_, std::nullopt);
      lock.unlock();
      std::optional<T> value;
      std::exception_ptr error;
      try {
        value.emplace(make_(k));
      } catch (...) {
        error = std::current_exception();
      }
      lock.lock();
      made_ = std::move(value);
      error_ = error;
      changed_.notify_all();
    }
  }

  std::function<T(int64_t)> make_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::optional<int64_t> requested_;
  std::optional<T> made_;
  std::exception_ptr error_;
  bool stopping_ = false;
  std::thread thread_;  // last: started once the members it uses exist
};

}  // namespace dprun
