#include "engine/backends/sim/sim_backend.h"

#include <cstring>
#include <map>
#include <string>

#include "engine/backends/sim/sim_capture.h"
#include "engine/backends/sim/sim_streams.h"
#include "engine/collective_lists.h"
#include "engine/error.h"
#include "engine/rewrites/op_fusion.h"
#include "engine/stream_order.h"
#include "engine/tensor.h"

namespace dprun {

namespace {

struct SimBackendRegistrar {
  SimBackendRegistrar() { register_backend(DeviceType::Sim, &SimBackend::instance()); }
} registrar;

// A simulated device's execution resource: the host threads of the CPU device of the same
// index, under the simulated device's name, and a stream of its own (sim_streams.h).
class SimExecutionContext final : public ExecutionContext {
 public:
  SimExecutionContext(Device device, std::unique_ptr<ExecutionContext> host)
      : device_(device), host_(std::move(host)), stream_(device) {}
  Device device() const override { return device_; }
  int threads() const override { return host_->threads(); }
  void parallel_for(int64_t n, int64_t grain,
                    const std::function<void(int64_t, int64_t)>& fn) const override {
    host_->parallel_for(n, grain, fn);
  }
  void run_on_one_thread(const std::function<void()>& fn) const override {
    host_->run_on_one_thread(fn);
  }
  void synchronize() override { sim_complete(stream_.stream()); }

 private:
  Device device_;
  std::unique_ptr<ExecutionContext> host_;
  SimStreamScope stream_;
};

// Sums `inputs` (host copies, like shapes and dtypes) into `out`, in list order.
template <class T>
void sum_into(const std::vector<Tensor>& inputs, Tensor& out) {
  T* dst = out.data<T>();
  const int64_t n = out.numel();
  for (int64_t i = 0; i < n; ++i) dst[i] = inputs[0].data<T>()[i];
  for (size_t d = 1; d < inputs.size(); ++d) {
    const T* src = inputs[d].data<T>();
    for (int64_t i = 0; i < n; ++i) dst[i] += src[i];
  }
}

// The part of one collective on each device, booked as NCCL's is: on a stream that waits for
// the work queued on the calling thread's current stream of the device, and that stream then
// waits for it; so, as such, on that current stream. The host waits for it only on a default
// stream (no context current), as for a copy there; otherwise the tensors are handed on with an
// event of the current stream (CollectiveOrder, engine/stream_order.h).
class CollectiveWork {
 public:
  explicit CollectiveWork(std::string what) : what_(std::move(what)) {}
  class OnDevice {
   public:
    OnDevice(Device device, const std::string& what)
        : device_(device), work_(device, what + " over sim devices") {}
    void reads(const Tensor& t) { work_.reads(device_, t.raw_data()); }
    void writes(const Tensor& t) { work_.writes(device_, t.raw_data()); }
    void wait() { work_.wait(); }
    SimStreamId stream() const { return work_.stream(); }

   private:
    Device device_;
    SimWork work_;
  };
  OnDevice& on(Device device) {
    return per_device_.try_emplace(device.index, device, what_).first->second;
  }
  void wait() {
    for (auto& [index, work] : per_device_)
      if (sim_is_default_stream(work.stream())) work.wait();
  }

 private:
  std::string what_;
  std::map<int, OnDevice> per_device_;
};

// A host copy of `t`'s bytes, read without booking work (the caller booked the collective).
Tensor bytes_to_host(const Tensor& t) {
  Tensor host = Tensor::empty(t.shape(), t.dtype(), Device::cpu());
  SimAccess access(t.device(), {t.raw_data()});
  std::memcpy(host.raw_data(), t.raw_data(), t.nbytes());
  return host;
}

}  // namespace

SimBackend& SimBackend::instance() {
  static SimBackend backend;
  return backend;
}

int SimBackend::device_count() const {
  return backend_for(DeviceType::CPU).device_count();
}

void SimBackend::check_device(Device device) const {
  DPRUN_CHECK(device.type == DeviceType::Sim && device.index >= 0,
              "not a simulated device: ", device.to_string());
}

std::shared_ptr<Allocator> SimBackend::allocator(Device device) {
  check_device(device);
  std::lock_guard lock(mutex_);
  auto& memory = memories_[device.index];
  if (!memory) memory = std::make_shared<SimMemory>(device);
  return memory;
}

void SimBackend::copy(void* dst, Device dst_device, const void* src, Device src_device,
                      size_t bytes) {
  if (bytes == 0) return;
  SimAccess to(dst_device, {dst});  // scopes nest: both sides may be the same device
  SimAccess from(src_device, {src});
  // Booked as the CUDA backend queues it: on the current stream of the destination when that is
  // a device, and waited for when it ends on the host or has no context.
  const bool to_host = dst_device.type != DeviceType::Sim;
  if (to_host && SimInPlaceReads::covers(src_device, src)) {  // a kernel reading its operand
    std::memcpy(dst, src, bytes);
    return;
  }
  const bool peer = !to_host && src_device.type == DeviceType::Sim && src_device != dst_device;
  if (!to_host && src_device.type != DeviceType::Sim)
    sim_check_copy_from_host(dst_device, sim_current_stream(dst_device), src);
  SimWork work(to_host ? src_device : dst_device, "a copy of " + std::to_string(bytes) +
                                                      " bytes from " + src_device.to_string() +
                                                      " to " + dst_device.to_string());
  work.reads(src_device, src);
  work.writes(dst_device, dst);
  std::memcpy(dst, src, bytes);
  // Between devices the copy is ordered on the destination's stream like its kernels: its
  // source's stream and later users wait for events (engine/stream_order.h).
  if (to_host || sim_is_default_stream(work.stream())) work.wait();
  count(to_host                              ? traffic_.device_to_host
        : src_device.type != DeviceType::Sim ? traffic_.host_to_device
        : peer                               ? traffic_.between_devices
                                             : traffic_.within_device,
        bytes);
}

void SimBackend::count(SimTraffic::Count& direction, size_t bytes) {
  std::lock_guard lock(traffic_mutex_);
  ++direction.copies;
  direction.bytes += static_cast<int64_t>(bytes);
}

SimTraffic SimBackend::traffic() const {
  std::lock_guard lock(traffic_mutex_);
  return traffic_;
}

void SimBackend::synchronize(Device device) {
  check_device(device);
  sim_complete_device(device);
}

DeviceProperties SimBackend::properties(Device device, int device_count) const {
  check_device(device);
  DeviceProperties p =
      backend_for(DeviceType::CPU).properties(Device::cpu(device.index), device_count);
  p.name = device.to_string();
  return p;
}

std::unique_ptr<ExecutionContext> SimBackend::create_execution_context(
    Device device, const ExecutionConfig& config) {
  check_device(device);
  return std::make_unique<SimExecutionContext>(
      device,
      backend_for(DeviceType::CPU).create_execution_context(Device::cpu(device.index), config));
}

std::shared_ptr<const Graph> SimBackend::rewrite_for_kernels(
    std::shared_ptr<const Graph> graph, const GraphRewriteOptions& options) const {
  if (options.fusion)
    if (std::shared_ptr<const Graph> fused = fuse_ops(*graph, DeviceType::Sim)) return fused;
  return graph;
}

void SimBackend::broadcast_coalesced(const std::vector<Tensor>& sources,
                                     const std::vector<std::vector<Tensor>>& destinations) {
  broadcast_devices(sources, destinations, DeviceType::Sim);
  for (size_t k = 0; k < sources.size(); ++k)
    DPRUN_CHECK(sources[k].dtype() != DType::String, "broadcast_coalesced: tensor ", k, " is ",
                sources[k].describe(), "; device collectives copy tensors of fixed-size elements");
  if (sources.empty()) return;
  CollectiveOrder order(sources, destinations);
  CollectiveWork work("a broadcast");
  for (const Tensor& source : sources) work.on(source.device()).reads(source);
  for (const auto& list : destinations)
    for (size_t k = 0; k < sources.size(); ++k) {
      Tensor destination = list[k];
      work.on(destination.device()).writes(destination);
      SimAccess to(destination.device(), {destination.raw_data()});
      SimAccess from(sources[k].device(), {sources[k].raw_data()});
      std::memcpy(destination.raw_data(), sources[k].raw_data(), sources[k].nbytes());
    }
  work.wait();
  order.done();
}

void SimBackend::reduce_add_coalesced(const std::vector<std::vector<Tensor>>& inputs,
                                      const std::vector<Tensor>& outputs) {
  if (outputs.empty()) return;
  reduce_add_devices(inputs, outputs, DeviceType::Sim);
  for (const Tensor& t : outputs)
    DPRUN_CHECK(t.dtype() == DType::Float32 || t.dtype() == DType::Float64 ||
                    t.dtype() == DType::Int32 || t.dtype() == DType::Int64,
                "reduce_add on sim devices: float32, float64, int32 and int64 tensors can be ",
                "summed, not ", dtype_name(t.dtype()));
  CollectiveOrder order(outputs, inputs);
  CollectiveWork work("a reduce");
  for (const auto& list : inputs)
    for (const Tensor& t : list) work.on(t.device()).reads(t);
  for (const Tensor& t : outputs) work.on(t.device()).writes(t);
  for (size_t k = 0; k < outputs.size(); ++k) {
    std::vector<Tensor> parts;
    for (const auto& list : inputs) parts.push_back(bytes_to_host(list[k]));
    Tensor sum = Tensor::empty(outputs[k].shape(), outputs[k].dtype(), Device::cpu());
    visit_dtype_among<float, double, int32_t, int64_t>(
        sum.dtype(), [&](auto tag) { sum_into<decltype(tag)>(parts, sum); });
    Tensor out = outputs[k];
    SimAccess access(out.device(), {out.raw_data()});
    std::memcpy(out.raw_data(), sum.raw_data(), sum.nbytes());
  }
  work.wait();
  order.done();
}

}  // namespace dprun
