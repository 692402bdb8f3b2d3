#include "engine/backends/sim/sim_streams.h"

#include <iterator>
#include <map>
#include <mutex>
#include <unordered_map>

#include "engine/error.h"

namespace dprun {

namespace {

struct Stream {
  Device device;
  bool is_default = false;
  bool closed = false;     // its scope has ended: nothing more is booked on it
  uint64_t booked = 0;     // pieces of work booked
  uint64_t completed = 0;  // of which the host has waited for the first `completed`
};

// The streams that work may still be pending on. A closed stream whose work is all done is
// forgotten (a run makes a stream, and training makes many runs); work booked on a stream that
// is not here is done.
struct Streams {
  std::mutex mutex;
  std::unordered_map<SimStreamId, Stream> live;
  std::map<int, SimStreamId> defaults;
  SimStreamId last_id = 0;

  SimStreamId create(Device device, bool is_default) {
    live.emplace(++last_id, Stream{.device = device, .is_default = is_default});
    return last_id;
  }
  // Marks everything booked on the stream at `it` done.
  void complete(std::unordered_map<SimStreamId, Stream>::iterator it) {
    it->second.completed = it->second.booked;
    if (it->second.closed) live.erase(it);
  }
};

Streams& streams() {
  static Streams* s = new Streams();  // never destroyed: tensors may be freed at exit
  return *s;
}

// The calling thread's current stream per simulated device index.
thread_local std::map<int, SimStreamId> current_streams;

}  // namespace

SimStreamScope::SimStreamScope(Device device)
    : device_(device), previous_(sim_current_stream(device)) {
  {
    std::lock_guard lock(streams().mutex);
    stream_ = streams().create(device, false);
  }
  current_streams[device.index] = stream_;
}

SimStreamScope::~SimStreamScope() {
  current_streams[device_.index] = previous_;
}

SimStreamId sim_current_stream(Device device) {
  if (auto it = current_streams.find(device.index); it != current_streams.end()) return it->second;
  Streams& s = streams();
  std::lock_guard lock(s.mutex);
  auto [it, made] = s.defaults.try_emplace(device.index, 0);
  if (made) it->second = s.create(device, true);
  current_streams[device.index] = it->second;
  return it->second;
}

bool sim_is_default_stream(SimStreamId stream) {
  std::lock_guard lock(streams().mutex);
  auto it = streams().live.find(stream);
  return it != streams().live.end() && it->second.is_default;
}

SimStreamPoint sim_book(SimStreamId stream) {
  std::lock_guard lock(streams().mutex);
  auto it = streams().live.find(stream);
  DPRUN_CHECK(it != streams().live.end() && !it->second.closed, "simulated stream ", stream,
              " has ended: no work can be booked on it");
  return {stream, ++it->second.booked};
}

void sim_complete(SimStreamId stream) {
  Streams& s = streams();
  std::lock_guard lock(s.mutex);
  if (auto it = s.live.find(stream); it != s.live.end()) s.complete(it);
}

void sim_complete_device(Device device) {
  Streams& s = streams();
  std::lock_guard lock(s.mutex);
  for (auto it = s.live.begin(); it != s.live.end();) {
    auto next = std::next(it);
    if (it->second.device == device) s.complete(it);
    it = next;
  }
}

bool sim_done(const SimStreamPoint& point) {
  std::lock_guard lock(streams().mutex);
  auto it = streams().live.find(point.stream);
  return it == streams().live.end() || it->second.completed >= point.seq;
}

std::string sim_stream_name(SimStreamId stream) {
  std::lock_guard lock(streams().mutex);
  auto it = streams().live.find(stream);
  if (it == streams().live.end()) return "stream " + std::to_string(stream);
  return it->second.is_default
             ? "the default stream of " + it->second.device.to_string()
             : "stream " + std::to_string(stream) + " of " + it->second.device.to_string();
}

}  // namespace dprun
