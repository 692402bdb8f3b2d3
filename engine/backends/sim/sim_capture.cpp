// The simulated devices' StreamCapture (sim_capture.h): a registry of the streams that capture
// or replay, by stream, with the graph's pool and the first rule the capture broke.
#include "engine/backends/sim/sim_capture.h"

#include <algorithm>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "engine/backends/sim/sim_memory.h"
#include "engine/error.h"
#include "engine/stream_capture.h"
#include "engine/tensor.h"

namespace dprun {

namespace {

struct Capture {
  Device device;
  std::thread::id thread;
  std::shared_ptr<SimGraphPool> pool;
  bool replay = false;
  std::string error;         // the first rule broken
  std::vector<Tensor> kept;  // host memory the work copies from
};

bool keeps(const Capture& c, const void* src) {
  const auto* p = static_cast<const char*>(src);
  return std::any_of(c.kept.begin(), c.kept.end(), [&](const Tensor& t) {
    const auto* start = static_cast<const char*>(t.raw_data());
    return p >= start && p < start + t.nbytes();
  });
}

struct Captures {
  std::mutex mutex;
  std::unordered_map<SimStreamId, Capture> by_stream;
};

Captures& captures() {
  static Captures* c = new Captures();  // never destroyed, as the streams
  return *c;
}

const char* mode(const Capture& c) {
  return c.replay ? "replays" : "captures";
}

// Records `message` as the capture's failure unless it has one already.
void record_failure(Captures& c, SimStreamId stream, const std::string& message) {
  if (auto it = c.by_stream.find(stream); it != c.by_stream.end() && it->second.error.empty())
    it->second.error = message;
}

// Records `message` as the capture's failure, then throws it.
[[noreturn]] void fail_capture(Captures& c, std::unique_lock<std::mutex>& lock, SimStreamId stream,
                               const std::string& message) {
  record_failure(c, stream, message);
  lock.unlock();
  fail(message);
}

// fail_capture, except while an exception is on its way (a wait made while unwinding: the
// capture has failed anyway), when the failure is only recorded.
void check_unwinding_or_fail(Captures& c, std::unique_lock<std::mutex>& lock, SimStreamId stream,
                             const std::string& message) {
  if (std::uncaught_exceptions() > 0) return record_failure(c, stream, message);
  fail_capture(c, lock, stream, message);
}

// The stream the calling thread captures or replays on `device`; 0 when none.
SimStreamId capturing_stream(Captures& c, Device device) {
  for (const auto& [stream, capture] : c.by_stream)
    if (capture.device == device && capture.thread == std::this_thread::get_id()) return stream;
  return 0;
}

}  // namespace

std::shared_ptr<SimGraphPool> sim_allocation_pool(Device device, SimStreamId stream) {
  Captures& c = captures();
  std::unique_lock lock(c.mutex);
  if (c.by_stream.empty()) return nullptr;
  if (auto it = c.by_stream.find(stream); it != c.by_stream.end()) return it->second.pool;
  const SimStreamId capturing = capturing_stream(c, device);
  if (capturing == 0) return nullptr;
  const std::string message = "an allocation on " + sim_stream_name(stream) + " while " +
                              sim_stream_name(capturing) + " " + mode(c.by_stream.at(capturing)) +
                              " a graph on this thread: memory a graph uses must come from its "
                              "private pool";
  fail_capture(c, lock, capturing, message);
}

// Fails the capture or replay on `stream`, if any, with `rule`: what the host or the work
// does (before it) and why a graph cannot have it (after it).
void check_stream(SimStreamId stream, const std::string& what, const std::string& why,
                  const void* kept = nullptr) {
  Captures& c = captures();
  std::unique_lock lock(c.mutex);
  auto it = c.by_stream.find(stream);
  if (it == c.by_stream.end() || (kept != nullptr && keeps(it->second, kept))) return;
  const std::string message =
      what + sim_stream_name(stream) + ", which " + mode(it->second) + " a graph: " + why;
  check_unwinding_or_fail(c, lock, stream, message);
}

void sim_check_host_wait(SimStreamId stream) {
  check_stream(stream, "the host waits for ",
               "a graph cannot make the host wait (a synchronize, a copy to the host, a "
               "collective's wait)");
}

void sim_check_device_wait(Device device) {
  Captures& c = captures();
  std::unique_lock lock(c.mutex);
  if (c.by_stream.empty()) return;
  const SimStreamId capturing = capturing_stream(c, device);
  if (capturing == 0) return;
  const std::string message = "the host waits for every stream of " + device.to_string() +
                              " while " + sim_stream_name(capturing) + " " +
                              mode(c.by_stream.at(capturing)) +
                              " a graph: a graph cannot make the host wait";
  check_unwinding_or_fail(c, lock, capturing, message);
}

void sim_check_copy_from_host(Device device, SimStreamId stream, const void* src) {
  check_stream(stream, "a copy from host memory to " + device.to_string() + " on ",
               "each replay would read that host memory again, after it is freed", src);
}

namespace {

// Registers `stream` as capturing or replaying on `device` with `pool`.
void enter(Device device, SimStreamId stream, std::shared_ptr<SimGraphPool> pool, bool replay) {
  DPRUN_CHECK(!sim_is_default_stream(stream), device.to_string(),
              ": a graph is captured and replayed on an execution context's stream, not on ",
              sim_stream_name(stream));
  Captures& c = captures();
  std::lock_guard lock(c.mutex);
  auto [it, made] = c.by_stream.try_emplace(
      stream, Capture{device, std::this_thread::get_id(), std::move(pool), replay, {}});
  DPRUN_CHECK(made, sim_stream_name(stream), " already ", mode(it->second), " a graph");
}

// Unregisters the calling thread's capture or replay on `device`; returns it.
Capture leave(Device device) {
  Captures& c = captures();
  std::lock_guard lock(c.mutex);
  auto it = c.by_stream.find(sim_current_stream(device));
  if (it == c.by_stream.end()) return {};
  Capture capture = std::move(it->second);
  c.by_stream.erase(it);
  return capture;
}

class SimGraph final : public CapturedGraph {
 public:
  SimGraph(Device device, std::shared_ptr<SimGraphPool> pool, std::vector<Tensor> kept)
      : device_(device), pool_(std::move(pool)), kept_(std::move(kept)) {}
  ~SimGraph() override { sim_memory(device_)->release_pool(*pool_); }

  void replay(const std::function<void()>& rerun) override {
    const auto memory = sim_memory(device_);
    enter(device_, sim_current_stream(device_), pool_, true);
    memory->begin_replay(*pool_);
    try {
      rerun();
    } catch (...) {
      leave(device_);
      try {
        memory->end_replay(*pool_);
      } catch (const Error&) {  // NOLINT(bugprone-empty-catch): the rerun's error is the one
      }
      throw;
    }
    const Capture ended = leave(device_);
    if (!ended.error.empty()) fail(ended.error);
    memory->end_replay(*pool_);
  }
  bool ran_at_capture() const override { return true; }

 private:
  Device device_;
  std::shared_ptr<SimGraphPool> pool_;
  std::vector<Tensor> kept_;  // the host memory the capture copied from
};

class SimStreamCapture final : public StreamCapture {
 public:
  void begin(Device device) override {
    enter(device, sim_current_stream(device), std::make_shared<SimGraphPool>(), false);
  }
  std::unique_ptr<CapturedGraph> end(Device device) override {
    Capture capture = leave(device);
    DPRUN_CHECK(capture.pool != nullptr, device.to_string(), ": no graph capture to end on ",
                sim_stream_name(sim_current_stream(device)));
    if (!capture.error.empty()) {
      sim_memory(device)->release_pool(*capture.pool);
      fail(capture.error);
    }
    return std::make_unique<SimGraph>(device, std::move(capture.pool), std::move(capture.kept));
  }
  void abort(Device device) noexcept override {
    Capture capture = leave(device);
    if (capture.pool) sim_memory(device)->release_pool(*capture.pool);
  }
  void keep(Device device, const Tensor& host) override {
    Captures& c = captures();
    std::lock_guard lock(c.mutex);
    if (auto it = c.by_stream.find(sim_current_stream(device)); it != c.by_stream.end())
      it->second.kept.push_back(host);
  }
  bool capturing(Device device) override {
    Captures& c = captures();
    std::lock_guard lock(c.mutex);
    return !c.by_stream.empty() && c.by_stream.count(sim_current_stream(device)) != 0;
  }
};

struct SimStreamCaptureRegistrar {
  SimStreamCaptureRegistrar() {
    static SimStreamCapture capture;
    register_stream_capture(DeviceType::Sim, &capture);
  }
} registrar;

}  // namespace

}  // namespace dprun
