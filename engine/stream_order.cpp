#include "engine/stream_order.h"

#include <map>
#include <mutex>
#include <unordered_map>

#include "engine/device_type_slots.h"
#include "engine/stream_capture.h"
#include "engine/tensor.h"

namespace dprun {

namespace {

DeviceTypeSlots<StreamOrder>& orders() {
  static DeviceTypeSlots<StreamOrder> registered;
  return registered;
}

// The stream operations of `device`'s type; nullptr for the CPU and types without streams.
StreamOrder* order_of(Device device) {
  return orders().get(device.type);
}

// The ready events of storages off the CPU, by storage. Kept beside the storages so that a
// tensor on the CPU carries nothing; each entry is erased with its storage.
struct ReadyEvents {
  std::mutex mutex;
  std::unordered_map<const Storage*, std::shared_ptr<const StreamEvent>> by_storage;
};

ReadyEvents& ready_events() {
  static ReadyEvents* events = new ReadyEvents();  // never destroyed: storages outlive statics
  return *events;
}

std::shared_ptr<const StreamEvent> ready_event_of(const Storage* storage) {
  ReadyEvents& r = ready_events();
  std::lock_guard lock(r.mutex);
  auto it = r.by_storage.find(storage);
  return it == r.by_storage.end() ? nullptr : it->second;
}

void set_ready_event(const Storage* storage, std::shared_ptr<const StreamEvent> event) {
  ReadyEvents& r = ready_events();
  std::lock_guard lock(r.mutex);
  if (event)
    r.by_storage[storage] = std::move(event);
  else
    r.by_storage.erase(storage);
}

// The devices on which the calling thread runs a plan (RunOrder), outermost first.
thread_local std::map<Device, int> runs_on_thread;

bool inside_run(Device device) {
  if (runs_on_thread.empty()) return false;
  auto it = runs_on_thread.find(device);
  return it != runs_on_thread.end() && it->second > 0;
}

}  // namespace

void register_stream_order(DeviceType type, StreamOrder* order) {
  orders().set(type, order);
}

StreamOrder* stream_order_for(DeviceType type) {
  return order_of(Device{type, 0});
}

void use_on_stream(const Tensor& t, Device stream_device, StreamWait why) {
  if (!t.defined()) return;
  const Device memory = t.device();
  StreamOrder* order = order_of(memory);
  if (order == nullptr) return;
  const std::shared_ptr<const Storage> storage = t.storage_handle().lock();
  if (std::shared_ptr<const StreamEvent> ready = ready_event_of(storage.get()))
    if (StreamOrder* stream_order = order_of(stream_device))
      stream_order->wait(stream_device, *ready, why);
  if (storage->owns_memory()) order->record_stream(memory, storage->data(), stream_device);
}

void hand_over(std::span<const Tensor* const> tensors, Device device) {
  StreamOrder* order = order_of(device);
  if (order == nullptr) return;
  std::shared_ptr<const StreamEvent> event = order->record(device);
  for (const Tensor* t : tensors)
    if (t != nullptr && t->defined() && t->device().type != DeviceType::CPU)
      set_ready_event(t->storage_handle().lock().get(), event);
}

void hand_over(std::span<const Tensor> tensors, Device device) {
  if (device.type == DeviceType::CPU) return;
  std::vector<const Tensor*> pointers;
  for (const Tensor& t : tensors) pointers.push_back(&t);
  hand_over(pointers, device);
}

CopyOrder::CopyOrder(const Tensor& dst, const Tensor& src)
    : dst_(dst),
      src_(src),
      stream_device_(dst.device().type != DeviceType::CPU ? dst.device() : src.device()) {
  if (stream_device_.type == DeviceType::CPU) return;
  // A capture copies from this host memory again at every replay: it keeps it.
  if (src.device().type == DeviceType::CPU && stream_capturing(stream_device_))
    stream_capture_for(stream_device_.type)->keep(stream_device_, src);
  if (inside_run(stream_device_)) return;
  active_ = true;
  use_on_stream(src_, stream_device_, StreamWait::Copy);
  use_on_stream(dst_, stream_device_, StreamWait::Copy);
}

void CopyOrder::done() {
  // A copy to the host has been waited for: what it read is done with.
  if (!active_ || dst_.device().type == DeviceType::CPU) return;
  const Tensor* touched[] = {&dst_, &src_};
  hand_over(touched, stream_device_);
}

CollectiveOrder::CollectiveOrder(const std::vector<Tensor>& list,
                                 const std::vector<std::vector<Tensor>>& lists) {
  for (const Tensor& t : list) tensors_.push_back(&t);
  for (const auto& more : lists)
    for (const Tensor& t : more) tensors_.push_back(&t);
  for (const Tensor* t : tensors_) use_on_stream(*t, t->device(), StreamWait::Collective);
}

void CollectiveOrder::done() {
  std::map<Device, std::vector<const Tensor*>> by_device;
  for (const Tensor* t : tensors_) by_device[t->device()].push_back(t);
  for (const auto& [device, list] : by_device) hand_over(list, device);
}

RunOrder::RunOrder(Device device) : device_(device) {
  if (device.type == DeviceType::CPU) return;
  active_ = runs_on_thread[device]++ == 0;
}

RunOrder::~RunOrder() {
  if (device_.type == DeviceType::CPU) return;
  auto it = runs_on_thread.find(device_);
  if (--it->second == 0) runs_on_thread.erase(it);
}

void RunOrder::begin(std::span<const Tensor* const> tensors) {
  if (!active_) return;
  for (const Tensor* t : tensors)
    if (t != nullptr) use_on_stream(*t, device_, StreamWait::Handover);
}

void RunOrder::end(std::span<const Tensor* const> tensors) {
  if (active_) hand_over(tensors, device_);
}

void forget_ready_event(const Storage* storage) {
  ReadyEvents& r = ready_events();
  std::lock_guard lock(r.mutex);
  r.by_storage.erase(storage);
}

}  // namespace dprun
