#include "engine/backends/cpu/cpu_cores.h"

#include <sched.h>

#include "engine/error.h"

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
}  // namespace

int available_cores() {
  return static_cast<int>(process_cpus().size());
}

std::vector<int> cpu_core_share(int index, int count) {
  const auto& cpus = process_cpus();
  int cores = static_cast<int>(cpus.size());
  DPRUN_CHECK(count > 0 && index >= 0, "invalid CPU device share ", index, " of ", count);
  if (count >= cores) return {cpus[index % cores]};
  // Device indices past the count wrap, as they do when there are more devices than cores.
  const int slot = index % count;
  int begin = slot * cores / count;
  int end = (slot + 1) * cores / count;
  return std::vector<int>(cpus.begin() + begin, cpus.begin() + end);
}

bool pin_current_thread(const std::vector<int>& cores) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cores) CPU_SET(c, &set);
  return sched_setaffinity(0, sizeof(set), &set) == 0;
}

}  // namespace dprun
