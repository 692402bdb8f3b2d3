#include "engine/backends/cpu/cpu_backend.h"

#include <sched.h>

#include <algorithm>
#include <cstring>

#include "engine/error.h"
#include "engine/parallel_for.h"

namespace dprun {

namespace {
std::vector<int> allowed_cpus() {
  std::vector<int> cpus;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  if (cpus.empty()) cpus.push_back(0);
  return cpus;
}

const std::vector<int>& process_cpus() {
  static const std::vector<int> cpus = allowed_cpus();
  return cpus;
}

struct CpuBackendRegistrar {
  CpuBackendRegistrar() { register_backend(DeviceType::CPU, &CpuBackend::instance()); }
} registrar;
}  // namespace

int available_cores() {
  return static_cast<int>(process_cpus().size());
}

std::vector<int> cpu_core_share(int index, int count) {
  const auto& cpus = process_cpus();
  int cores = static_cast<int>(cpus.size());
  DPRUN_CHECK(count > 0 && index >= 0, "invalid CPU device share ", index, " of ", count);
  if (count >= cores) return {cpus[index % cores]};
  int begin = index * cores / count;
  int end = (index + 1) * cores / count;
  return std::vector<int>(cpus.begin() + begin, cpus.begin() + end);
}

bool pin_current_thread(const std::vector<int>& cores) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cores) CPU_SET(c, &set);
  return sched_setaffinity(0, sizeof(set), &set) == 0;
}

CpuBackend& CpuBackend::instance() {
  static CpuBackend backend;
  return backend;
}

int CpuBackend::device_count() const {
  return available_cores();
}

void CpuBackend::check_device(Device device) const {
  DPRUN_CHECK(device.type == DeviceType::CPU && device.index >= 0,
              "not a CPU device: ", device.to_string());
}

std::shared_ptr<Allocator> CpuBackend::allocator(Device device) {
  check_device(device);
  std::lock_guard lock(mutex_);
  auto& slot = allocators_[device.index];
  if (!slot) slot = std::make_shared<CachingHostAllocator>(device);
  return slot;
}

void CpuBackend::copy(void* dst, Device, const void* src, Device, size_t bytes) {
  if (bytes) std::memcpy(dst, src, bytes);
}

DeviceProperties CpuBackend::properties(Device device) const {
  DeviceProperties p;
  p.name = device.to_string();
  p.compute_units = 1;
  return p;
}

int CpuBackend::prepare_worker_thread(Device device, int device_count, int threads) {
  check_device(device);
  std::vector<int> cores = cpu_core_share(device.index, std::max(device_count, 1));
  int n = threads > 0 ? threads : static_cast<int>(cores.size());
  // Re-pinning costs a parallel region; do it only when this thread's configuration changes.
  thread_local std::vector<int> pinned_cores;
  thread_local int pinned_threads = 0;
  set_intra_op_threads(n);
  if (pinned_cores == cores && pinned_threads == n) return n;
  pin_current_thread(cores);
  // OpenMP team threads inherit affinity only when created; re-pin the team to the share.
#pragma omp parallel num_threads(n)
  { pin_current_thread(cores); }
  pinned_cores = cores;
  pinned_threads = n;
  return n;
}

}  // namespace dprun
