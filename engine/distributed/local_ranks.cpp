#include "engine/distributed/local_ranks.h"

#include <unistd.h>

#include <functional>
#include <string>

#include "engine/error.h"

namespace dprun {

uint64_t host_id() {
  char name[256] = {};
  gethostname(name, sizeof(name) - 1);
  return std::hash<std::string>{}(name);
}

LocalRanks local_ranks(ProcessGroup& group) {
  const uint64_t mine = host_id();
  const std::vector<uint64_t> hosts = all_gather_values(group, mine);
  LocalRanks local{0, 0};
  for (int r = 0; r < group.size(); ++r) {
    if (hosts[static_cast<size_t>(r)] != mine) continue;
    if (r < group.rank()) ++local.rank;
    ++local.size;
  }
  return local;
}

std::vector<Device> local_share(const std::vector<Device>& devices, LocalRanks local) {
  const auto n = static_cast<int>(devices.size());
  DPRUN_CHECK(local.size >= 1 && local.rank >= 0 && local.rank < local.size, "local rank ",
              local.rank, " of ", local.size);
  if (local.size > n) {
    std::string names;
    for (const Device& d : devices) {
      if (!names.empty()) names += ',';
      names += d.to_string();
    }
    fail(local.size, " ranks on this host share ", n, " device", n == 1 ? "" : "s", " (", names,
         "): each rank needs one of its own; name them with --devices");
  }
  return {devices.begin() + local.rank * n / local.size,
          devices.begin() + (local.rank + 1) * n / local.size};
}

}  // namespace dprun
