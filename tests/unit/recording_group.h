#pragma once
// A one-rank ProcessGroup that records the all-reduces started on it (their values, order,
// device and thread) and completes each at once. It sums in `device`'s memory (host memory by
// default).
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "engine/distributed/process_group.h"

namespace dprun::testing {

class RecordingGroup : public ProcessGroup {
 public:
  struct Done : CollectiveWork {
    bool test() override { return true; }
    void wait() override {}
  };
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string backend() const override { return "recording"; }
  Device reduce_device() const override { return device; }
  std::unique_ptr<CollectiveWork> all_reduce_sum(Tensor tensor, ReduceOrder order) override {
    const Tensor host = tensor.device().type == DeviceType::CPU ? tensor : tensor.to(Device::cpu());
    started.push_back(std::vector<float>(host.data<float>(), host.data<float>() + host.numel()));
    devices.push_back(tensor.device());
    orders.push_back(order);
    threads.push_back(std::this_thread::get_id());
    events.push_back("all_reduce_sum of " + std::to_string(tensor.numel()));
    return std::make_unique<Done>();
  }
  void broadcast(Tensor, int) override {}
  std::vector<uint8_t> all_gather(std::span<const uint8_t> b) override {
    return {b.begin(), b.end()};
  }
  std::vector<std::vector<uint8_t>> gather(std::span<const uint8_t> b, int) override {
    return {{b.begin(), b.end()}};
  }
  void barrier() override {}
  [[noreturn]] void abort(int) override { std::abort(); }

  Device device = Device::cpu();
  std::vector<std::vector<float>> started;
  std::vector<Device> devices;
  std::vector<ReduceOrder> orders;
  std::vector<std::thread::id> threads;
  std::vector<std::string> events;  // the all-reduces, and whatever a test adds
};

}  // namespace dprun::testing
