#pragma once
// The host cores this process may use and how CPU virtual devices share them.
#include <vector>

namespace dprun {

/// Number of cores this process may run on (its affinity mask), at least 1.
int available_cores();
/// The cores of virtual device `index` when `count` CPU devices share the machine: a disjoint
/// contiguous block when count <= cores, otherwise core (index mod cores).
std::vector<int> cpu_core_share(int index, int count);
/// Pins the calling thread to `cores` where the OS allows; returns false when it could not.
bool pin_current_thread(const std::vector<int>& cores);

}  // namespace dprun
