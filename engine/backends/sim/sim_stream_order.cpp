// The stream operations of the simulated devices (engine/stream_order.h) on the booked streams
// of sim_streams.h: an event is a snapshot of what its stream's work is ordered after, a wait
// merges it into the waiting stream's, and record_stream tells the device's SimMemory.
#include "engine/backends/sim/sim_drop_wait.h"
#include "engine/backends/sim/sim_memory.h"
#include "engine/backends/sim/sim_streams.h"
#include "engine/stream_order.h"

namespace dprun {

namespace {

struct SimEvent final : StreamEvent {
  explicit SimEvent(SimEventPoint p) : point(std::move(p)) {}
  SimEventPoint point;
};

const char* wait_name(StreamWait why) {
  switch (why) {
    case StreamWait::Copy:
      return "copy";
    case StreamWait::Collective:
      return "collective";
    case StreamWait::Handover:
      return "handover";
  }
  return "";
}

class SimStreamOrder final : public StreamOrder {
 public:
  std::shared_ptr<const StreamEvent> record(Device device) override {
    const SimStreamId stream = sim_current_stream(device);
    // The default stream's work is waited for by whoever books it (sim_streams.h).
    if (sim_is_default_stream(stream)) return nullptr;
    return std::make_shared<SimEvent>(sim_record(stream));
  }
  void wait(Device device, const StreamEvent& event, StreamWait why) override {
    if (sim_wait_dropped(wait_name(why))) return;
    sim_wait(sim_current_stream(device), static_cast<const SimEvent&>(event).point);
  }
  void record_stream(Device memory, const void* data, Device stream_device) override {
    if (stream_device.type != DeviceType::Sim || sim_wait_dropped("record_stream")) return;
    sim_memory(memory)->record_stream(data, sim_current_stream(stream_device));
  }
};

struct SimStreamOrderRegistrar {
  SimStreamOrderRegistrar() {
    static SimStreamOrder order;
    register_stream_order(DeviceType::Sim, &order);
  }
} registrar;

}  // namespace

}  // namespace dprun
