#include "engine/distributed/host_cores.h"

#include <sched.h>

#include <cstring>

#include "engine/distributed/local_ranks.h"

namespace dprun {

namespace {

struct HostMask {
  uint64_t host = 0;  // hash of the host name
  uint8_t mask[CPU_SETSIZE / 8] = {};
};

std::vector<int> cpus_of(const HostMask& m) {
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (m.mask[c / 8] & (1u << (c % 8))) cpus.push_back(c);
  return cpus;
}

}  // namespace

std::vector<int> share_host_cores(ProcessGroup& group, LocalRanks local) {
  HostMask mine;
  mine.host = host_id();
  cpu_set_t set;
  CPU_ZERO(&set);
  DPRUN_CHECK(sched_getaffinity(0, sizeof(set), &set) == 0, "cannot read this rank's CPU affinity");
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) mine.mask[c / 8] |= static_cast<uint8_t>(1u << (c % 8));
  std::vector<HostMask> all = all_gather_values(group, mine);

  bool same_masks = true;
  for (const HostMask& other : all)
    if (other.host == mine.host)
      same_masks &= std::memcmp(other.mask, mine.mask, sizeof(mine.mask)) == 0;
  std::vector<int> cpus = cpus_of(mine);
  const int count = local.size;
  if (!same_masks || count == 1 || cpus.empty()) return cpus;
  int cores = static_cast<int>(cpus.size());
  std::vector<int> share;
  if (count >= cores) {
    share = {cpus[static_cast<size_t>(local.rank % cores)]};
  } else {
    share.assign(cpus.begin() + local.rank * cores / count,
                 cpus.begin() + (local.rank + 1) * cores / count);
  }
  CPU_ZERO(&set);
  for (int c : share) CPU_SET(c, &set);
  DPRUN_CHECK(sched_setaffinity(0, sizeof(set), &set) == 0,
              "cannot restrict this rank to its share of the host's cores");
  return share;
}

}  // namespace dprun
