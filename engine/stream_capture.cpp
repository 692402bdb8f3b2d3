#include "engine/stream_capture.h"

#include <array>
#include <atomic>

namespace dprun {

namespace {
std::array<std::atomic<StreamCapture*>, 3>& captures() {
  static std::array<std::atomic<StreamCapture*>, 3> registered{};
  return registered;
}
}  // namespace

void register_stream_capture(DeviceType type, StreamCapture* capture) {
  captures()[static_cast<size_t>(type)].store(capture, std::memory_order_release);
}

StreamCapture* stream_capture_for(DeviceType type) {
  if (type == DeviceType::CPU) return nullptr;
  return captures()[static_cast<size_t>(type)].load(std::memory_order_acquire);
}

bool stream_capturing(Device device) {
  StreamCapture* capture = stream_capture_for(device.type);
  return capture != nullptr && capture->capturing(device);
}

}  // namespace dprun
