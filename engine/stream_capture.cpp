#include "engine/stream_capture.h"

#include "engine/device_type_slots.h"

namespace dprun {

namespace {
DeviceTypeSlots<StreamCapture>& captures() {
  static DeviceTypeSlots<StreamCapture> registered;
  return registered;
}
}  // namespace

void register_stream_capture(DeviceType type, StreamCapture* capture) {
  captures().set(type, capture);
}

StreamCapture* stream_capture_for(DeviceType type) {
  return captures().get(type);
}

bool stream_capturing(Device device) {
  StreamCapture* capture = stream_capture_for(device.type);
  return capture != nullptr && capture->capturing(device);
}

}  // namespace dprun
