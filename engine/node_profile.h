#pragma once
// The time of each node of the runs it observes (a NodeObserver, engine/executor.h): a node is
// timed from its start to its end with its device synchronized on both sides, so each node's
// time is its own and not its launch's (the waits, some microseconds each, are counted in).
// `dprun bench --profile` and `dprun train --profile` read it; so can an application, by adding
// observer() to its RunOptions or DataParallelOptions (TrainerOptions::parallel).
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "engine/executor.h"

namespace dprun {

class NodeProfile {
 public:
  /// A training graph's backward nodes are named "grad/..." (engine/autograd).
  enum class Phase { Forward, Backward };

  struct OpFigures {
    int64_t calls = 0;
    double forward_seconds = 0, backward_seconds = 0;
  };
  struct NodeFigures {
    std::string op;
    std::string key;           // its first output, which names it in every replica
    std::string input_shapes;  // at its first call, "-" for an absent input
    Phase phase = Phase::Forward;
    int64_t calls = 0;
    double seconds = 0;
  };

  /// An observer recording into this profile while recording() is on. The profile must
  /// outlive every run that uses it.
  NodeObserver observer();
  /// Off: the observer's nodes are not timed (a training run's warm-up steps). On by default.
  void set_recording(bool on);
  bool recording() const;

  /// By op type, summed over every device.
  std::map<std::string, OpFigures> by_op() const;
  /// Every node, in the order of their first calls.
  std::vector<NodeFigures> nodes() const;
  /// The nodes' time by device (Device::to_string()).
  std::map<std::string, double> by_device() const;
  /// Every node's time, summed.
  double total_seconds() const;

  /// The phase of `node`.
  static Phase phase_of(const Node& node);
  /// What observing one node costs, in seconds (its two calls on a device with nothing to wait
  /// for, timed over many calls): the profiler's own share of a profiled run.
  static double cost_per_node();

 private:
  mutable std::mutex mutex_;
  bool recording_ = true;
  std::map<std::string, OpFigures> by_op_;
  std::map<std::string, size_t> index_;  // node key -> position in nodes_
  std::vector<NodeFigures> nodes_;
  std::map<std::string, double> by_device_;
};

}  // namespace dprun
