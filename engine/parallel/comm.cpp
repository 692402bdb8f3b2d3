#include "engine/parallel/comm.h"

#include <optional>
#include <set>

#include "engine/backend.h"
#include "engine/dtype.h"
#include "engine/parallel/run_in_parts.h"

namespace dprun {

namespace {

// Below this many elements in all, one thread sums them.
constexpr int64_t kMinParallelElements = 1 << 15;

// out = parts[0] + parts[1] + ..., element by element in list order.
template <class T>
void sum_range(T* out, const std::vector<const T*>& parts, int64_t first, int64_t last) {
  const T* a = parts[0];
  if (parts.size() == 1) {
    for (int64_t i = first; i < last; ++i) out[i] = a[i];
    return;
  }
  const T* b = parts[1];
  for (int64_t i = first; i < last; ++i) out[i] = a[i] + b[i];
  for (size_t p = 2; p < parts.size(); ++p) {
    const T* c = parts[p];
    for (int64_t i = first; i < last; ++i) out[i] += c[i];
  }
}

template <class T>
std::vector<const T*> pointers(const std::vector<Tensor>& parts) {
  std::vector<const T*> out;
  for (const Tensor& t : parts) out.push_back(t.data<T>());
  return out;
}

// The one device that holds every tensor of `list`; `fallback` for an empty list.
std::optional<Device> list_device(const std::vector<Tensor>& list, Device fallback) {
  if (list.empty()) return fallback;
  for (const Tensor& t : list)
    if (t.device() != list[0].device()) return std::nullopt;
  return list[0].device();
}

// True when `devices` are distinct devices of the non-CPU type `type`: a backend collective
// serves them. CPU devices share host memory and never need one.
bool distinct_of_type(const std::vector<Device>& devices, DeviceType type) {
  if (type == DeviceType::CPU) return false;
  std::set<Device> seen;
  for (const Device& d : devices)
    if (d.type != type || !seen.insert(d).second) return false;
  return true;
}

// The host sum onto the CPU device `destination`: today's path, in list order.
std::vector<Tensor> host_reduce_add(const std::vector<std::vector<Tensor>>& inputs,
                                    Device destination, const std::vector<Device>& workers) {
  const size_t count = inputs[0].size();
  // parts[k][d]: device d's tensor k, in host memory (CPU devices share it, so CPU tensors are
  // read where they are).
  std::vector<std::vector<Tensor>> parts(count);
  std::vector<Tensor> sums;
  for (size_t k = 0; k < count; ++k) {
    const Tensor& first = inputs[0][k];
    DPRUN_CHECK(first.dtype() == DType::Float32 || first.dtype() == DType::Float64,
                "reduce_add: only float32 and float64 tensors can be summed, not ",
                first.describe());
    for (size_t d = 0; d < inputs.size(); ++d) {
      const Tensor& t = inputs[d][k];
      parts[k].push_back(t.device().type == DeviceType::CPU ? t : t.to(destination));
    }
    sums.push_back(Tensor::empty(first.shape(), first.dtype(), destination));
  }
  std::vector<int64_t> counts = element_counts(sums);
  int64_t total = 0;
  for (int64_t c : counts) total += c;
  run_in_parts(workers, total, kMinParallelElements, [&](int64_t begin, int64_t end) {
    for_each_piece(counts, begin, end, [&](size_t k, int64_t first, int64_t last) {
      if (sums[k].dtype() == DType::Float64)
        sum_range(sums[k].data<double>(), pointers<double>(parts[k]), first, last);
      else
        sum_range(sums[k].data<float>(), pointers<float>(parts[k]), first, last);
    });
  });
  return sums;
}

}  // namespace

std::vector<std::vector<Tensor>> broadcast_coalesced(const std::vector<Tensor>& tensors,
                                                     const std::vector<Device>& devices) {
  std::vector<std::vector<Tensor>> out(devices.size());
  if (tensors.empty()) return out;
  // Tensors on several devices are copied one by one.
  const std::optional<Device> source = list_device(tensors, Device::cpu());
  bool collective = false;
  if (source) {
    std::vector<Device> involved = {*source};
    for (const Device& d : devices)
      if (d != *source) involved.push_back(d);
    collective = involved.size() > 1 && distinct_of_type(involved, source->type);
  }
  std::vector<std::vector<Tensor>> destinations;  // the new lists, for the collective
  for (size_t d = 0; d < devices.size(); ++d) {
    if (devices[d] == source) {
      out[d] = tensors;
      continue;
    }
    for (const Tensor& t : tensors)
      out[d].push_back(collective ? Tensor::empty(t.shape(), t.dtype(), devices[d])
                                  : t.to(devices[d], /*copy=*/true));
    if (collective) destinations.push_back(out[d]);
  }
  if (collective) backend_for(*source).broadcast_coalesced(tensors, destinations);
  return out;
}

void broadcast_coalesced_into(const std::vector<Tensor>& sources,
                              const std::vector<std::vector<Tensor>>& destinations) {
  if (sources.empty()) return;
  // Sources on several devices are copied one by one.
  const std::optional<Device> source = list_device(sources, Device::cpu());
  std::vector<std::vector<Tensor>> lists;  // those that share no storage with the sources
  std::vector<Device> devices = {source.value_or(Device::cpu())};
  bool one_device_each = source.has_value();
  for (const auto& list : destinations) {
    DPRUN_CHECK(list.size() == sources.size(), "broadcast_coalesced: a destination list has ",
                list.size(), " tensors for ", sources.size(), " sources");
    bool shared = false;
    for (size_t k = 0; k < list.size() && !shared; ++k)
      shared = list[k].shares_storage_with(sources[k]);
    if (shared) continue;
    const std::optional<Device> device = list_device(list, devices[0]);
    one_device_each = one_device_each && device.has_value();
    devices.push_back(device.value_or(devices[0]));
    lists.push_back(list);
  }
  if (lists.empty()) return;
  if (one_device_each && distinct_of_type(devices, devices[0].type)) {
    backend_for(devices[0]).broadcast_coalesced(sources, lists);
    return;
  }
  for (const auto& list : lists)
    for (size_t k = 0; k < sources.size(); ++k) {
      Tensor target = list[k];  // a handle on the destination's storage
      target.copy_from(sources[k]);
    }
}

Tensor reduce_add(const std::vector<Tensor>& inputs, Device destination) {
  std::vector<std::vector<Tensor>> lists;
  for (const Tensor& t : inputs) lists.push_back({t});
  DPRUN_CHECK(!lists.empty(), "reduce_add: no tensors given");
  return reduce_add_coalesced(lists, destination)[0];
}

std::vector<Tensor> reduce_add_coalesced(const std::vector<std::vector<Tensor>>& inputs,
                                         Device destination, const std::vector<Device>& workers) {
  DPRUN_CHECK(!inputs.empty(), "reduce_add: no tensors given");
  const size_t count = inputs[0].size();
  for (size_t k = 0; k < count; ++k) {
    const Tensor& first = inputs[0][k];
    for (size_t d = 0; d < inputs.size(); ++d) {
      DPRUN_CHECK(inputs[d].size() == count, "reduce_add: device ", d, " gave ", inputs[d].size(),
                  " tensors but device 0 gave ", count);
      const Tensor& t = inputs[d][k];
      DPRUN_CHECK(t.shape() == first.shape() && t.dtype() == first.dtype(), "reduce_add: tensor ",
                  d, " is ", t.describe(), " but tensor 0 is ", first.describe());
    }
  }
  if (destination.type == DeviceType::CPU) return host_reduce_add(inputs, destination, workers);
  // A GPU destination: one collective when the lists sit on distinct GPUs of its type, one of
  // them the destination.
  std::vector<Device> devices;
  bool holds_destination = false;
  for (const auto& list : inputs) {
    std::optional<Device> d = list_device(list, destination);
    devices.push_back(d.value_or(Device::cpu()));
    holds_destination = holds_destination || d == destination;
  }
  if (holds_destination && distinct_of_type(devices, destination.type)) {
    std::vector<Tensor> sums;
    for (const Tensor& t : inputs[0])
      sums.push_back(Tensor::empty(t.shape(), t.dtype(), destination));
    backend_for(destination).reduce_add_coalesced(inputs, sums);
    return sums;
  }
  // Otherwise in host memory, in list order, then onto the destination.
  std::vector<Tensor> sums = host_reduce_add(inputs, Device::cpu(), workers);
  for (Tensor& s : sums) s = s.to(destination);
  return sums;
}

}  // namespace dprun
