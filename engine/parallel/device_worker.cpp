#include "engine/parallel/device_worker.h"

#include <map>
#include <memory>

namespace dprun {

DeviceWorker::DeviceWorker(Device device) : device_(device), thread_([this] { loop(); }) {}

DeviceWorker::~DeviceWorker() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

std::future<void> DeviceWorker::submit(std::function<void()> task) {
  std::packaged_task<void()> packaged(std::move(task));
  std::future<void> done = packaged.get_future();
  {
    std::lock_guard lock(mutex_);
    queue_.push_back(std::move(packaged));
  }
  wake_.notify_one();
  return done;
}

void DeviceWorker::loop() {
  for (;;) {
    std::packaged_task<void()> task;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    task();  // exceptions of every type are stored in the task's future, never thrown here
  }
}

DeviceWorker& device_worker(Device device) {
  static std::mutex mutex;
  static std::map<Device, std::unique_ptr<DeviceWorker>> workers;
  std::lock_guard lock(mutex);
  auto& slot = workers[device];
  if (!slot) slot = std::make_unique<DeviceWorker>(device);
  return *slot;
}

}  // namespace dprun
