#pragma once
// The debug switch that drops one kind of stream wait on the simulated devices, to show that
// the sim catches it missing: DPRUN_SIM_DROP_WAIT names the kinds, comma-separated:
//
//   copy           a copy does not wait for its source's and destination's ready events
//   collective     a collective does not wait for its tensors' ready events
//   handover       a run does not wait for its inputs' and parameters' ready events
//   record_stream  the sim allocator is not told of a block's use on another stream
//   graph_pool     a graph's replay gets fresh memory, not the addresses of its capture
//                  (sim_capture.h): its static outputs keep the capture's values
//
// A dropped wait lets the faulty order through to the sim's checks (sim_memory.h): the work
// that relied on it then fails as a race, or the release of the memory stops the process.
// Read on every wait, so a test can set it around one piece of work. Never set in production.
#include <string_view>

namespace dprun {

/// Whether DPRUN_SIM_DROP_WAIT names `kind`.
bool sim_wait_dropped(std::string_view kind);

}  // namespace dprun
