#include "engine/backends/sim/sim_streams.h"

#include <iterator>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "engine/backends/sim/sim_capture.h"
#include "engine/error.h"

namespace dprun {

namespace {

struct Stream {
  Device device;
  bool is_default = false;
  bool closed = false;     // its scope has ended: nothing more is booked on it
  uint64_t booked = 0;     // pieces of work booked
  uint64_t completed = 0;  // of which the host has waited for the first `completed`
  // Per other stream, the work that work booked here from now on is ordered after (events).
  std::map<SimStreamId, uint64_t> waited;
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
  // Marks everything booked on the stream at `it` done, and the work it waited for.
  void complete(std::unordered_map<SimStreamId, Stream>::iterator it) {
    it->second.completed = it->second.booked;
    for (const auto& [other, seq] : it->second.waited)
      if (auto o = live.find(other); o != live.end() && o->second.completed < seq) {
        o->second.completed = seq;
        if (o->second.closed && o->second.completed == o->second.booked) live.erase(o);
      }
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
  // Nothing more is booked on the stream: it is forgotten once its work is done.
  Streams& s = streams();
  std::lock_guard lock(s.mutex);
  if (auto it = s.live.find(stream_); it != s.live.end()) {
    it->second.closed = true;
    if (it->second.completed == it->second.booked) s.live.erase(it);
  }
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
  sim_check_host_wait(stream);
  Streams& s = streams();
  std::lock_guard lock(s.mutex);
  if (auto it = s.live.find(stream); it != s.live.end()) s.complete(it);
}

void sim_complete_device(Device device) {
  sim_check_device_wait(device);
  Streams& s = streams();
  std::lock_guard lock(s.mutex);
  // Completing one stream may forget others (what it waited for): find each by its id.
  std::vector<SimStreamId> on_device;
  for (const auto& [id, stream] : s.live)
    if (stream.device == device) on_device.push_back(id);
  for (SimStreamId id : on_device)
    if (auto it = s.live.find(id); it != s.live.end()) s.complete(it);
}

bool sim_done(const SimStreamPoint& point) {
  std::lock_guard lock(streams().mutex);
  auto it = streams().live.find(point.stream);
  return it == streams().live.end() || it->second.completed >= point.seq;
}

bool sim_ordered(const SimStreamPoint& earlier, SimStreamId later) {
  if (earlier.stream == later) return true;
  std::lock_guard lock(streams().mutex);
  auto it = streams().live.find(earlier.stream);
  if (it == streams().live.end() || it->second.completed >= earlier.seq) return true;
  auto waiter = streams().live.find(later);
  if (waiter == streams().live.end()) return false;
  auto w = waiter->second.waited.find(earlier.stream);
  return w != waiter->second.waited.end() && w->second >= earlier.seq;
}

bool sim_idle(SimStreamId stream) {
  std::lock_guard lock(streams().mutex);
  auto it = streams().live.find(stream);
  return it == streams().live.end() || it->second.completed == it->second.booked;
}

SimEventPoint sim_record(SimStreamId stream) {
  std::lock_guard lock(streams().mutex);
  auto it = streams().live.find(stream);
  if (it == streams().live.end()) return {};
  SimEventPoint event{.stream = stream, .clock = it->second.waited};
  event.clock[stream] = it->second.booked;
  return event;
}

void sim_wait(SimStreamId stream, const SimEventPoint& event) {
  std::lock_guard lock(streams().mutex);
  auto it = streams().live.find(stream);
  if (it == streams().live.end()) return;
  auto& waited = it->second.waited;
  for (const auto& [other, seq] : event.clock) {
    if (other == stream) continue;
    uint64_t& known = waited[other];
    if (known < seq) known = seq;
  }
  // Work the host has waited for needs no entry: long runs make many streams.
  for (auto w = waited.begin(); w != waited.end();) {
    auto other = streams().live.find(w->first);
    const bool done = other == streams().live.end() || other->second.completed >= w->second;
    w = done ? waited.erase(w) : std::next(w);
  }
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
