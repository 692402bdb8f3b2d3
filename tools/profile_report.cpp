#include "tools/profile_report.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace dprun::cli {
namespace {

using OpRow = std::pair<std::string, NodeProfile::OpFigures>;

double seconds_of(const NodeProfile::OpFigures& f) {
  return f.forward_seconds + f.backward_seconds;
}

/// The op types, slowest first.
std::vector<OpRow> slowest_ops(const NodeProfile& profile) {
  const auto by_op = profile.by_op();
  std::vector<OpRow> rows(by_op.begin(), by_op.end());
  std::stable_sort(rows.begin(), rows.end(), [](const OpRow& a, const OpRow& b) {
    return seconds_of(a.second) > seconds_of(b.second);
  });
  return rows;
}

double share(double part, double total) {
  return total > 0 ? 100.0 * part / total : 0.0;
}

const char* phase_name(NodeProfile::Phase phase) {
  return phase == NodeProfile::Phase::Backward ? "backward" : "forward";
}

/// The profiler's own cost over the profiled steps: two observer calls per node call.
double profiler_seconds(const NodeProfile& profile) {
  int64_t calls = 0;
  for (const auto& [op, figures] : profile.by_op()) calls += figures.calls;
  return static_cast<double>(calls) * NodeProfile::cost_per_node();
}

/// The busiest device's node time: the devices run their replicas at once, so the step's time
/// outside the nodes is what the busiest one leaves.
double busiest_device_seconds(const NodeProfile& profile) {
  double busiest = 0;
  for (const auto& [device, seconds] : profile.by_device()) busiest = std::max(busiest, seconds);
  return busiest;
}

}  // namespace

void print_op_table(const NodeProfile& profile, int64_t iterations) {
  const double total = profile.total_seconds();
  const double per = static_cast<double>(std::max<int64_t>(iterations, 1));
  std::printf("\n%-24s %8s %12s %7s\n", "op", "calls/it", "ms/it", "share");
  for (const auto& [op, f] : slowest_ops(profile))
    std::printf("%-24s %8lld %12.3f %6.1f%%\n", op.c_str(),
                static_cast<long long>(f.calls / std::max<int64_t>(iterations, 1)),
                seconds_of(f) * 1e3 / per, share(seconds_of(f), total));
}

void print_node_table(const NodeProfile& profile, int64_t iterations) {
  const double per = static_cast<double>(std::max<int64_t>(iterations, 1));
  std::printf("\n%-24s %10s  %s\n", "op", "ms/it", "node (first output): input shapes");
  for (const NodeProfile::NodeFigures& n : profile.nodes())
    std::printf("%-24s %10.3f  %s: %s\n", n.op.c_str(), n.seconds * 1e3 / per, n.key.c_str(),
                n.input_shapes.c_str());
}

void print_training_profile(const NodeProfile& profile, const TrainingProfileSteps& steps,
                            size_t top) {
  const double per = static_cast<double>(std::max<int64_t>(steps.steps, 1));
  const double nodes = profile.total_seconds();
  std::printf(
      "\nprofile of the %lld step%s after the warm-up (ms per step; each node timed "
      "alone, its device synchronized before and after it)\n",
      static_cast<long long>(steps.steps), steps.steps == 1 ? "" : "s");
  std::printf("%-26s %9s %11s %11s %11s %7s\n", "op", "calls", "forward", "backward", "total",
              "share");
  for (const auto& [op, f] : slowest_ops(profile))
    std::printf("%-26s %9.1f %11.3f %11.3f %11.3f %6.1f%%\n", op.c_str(),
                static_cast<double>(f.calls) / per, f.forward_seconds * 1e3 / per,
                f.backward_seconds * 1e3 / per, seconds_of(f) * 1e3 / per,
                share(seconds_of(f), nodes));
  std::vector<NodeProfile::NodeFigures> slowest = profile.nodes();
  std::stable_sort(slowest.begin(), slowest.end(),
                   [](const auto& a, const auto& b) { return a.seconds > b.seconds; });
  slowest.resize(std::min(slowest.size(), top));
  std::printf("\nslowest nodes (ms per step, phase, op, first output: input shapes)\n");
  for (const NodeProfile::NodeFigures& n : slowest)
    std::printf("%9.3f  %-8s %-20s %s: %s\n", n.seconds * 1e3 / per, phase_name(n.phase),
                n.op.c_str(), n.key.c_str(), n.input_shapes.c_str());
  std::printf("\n");
  for (const auto& [device, seconds] : profile.by_device())
    std::printf("%-10s nodes %10.3f ms per step\n", device.c_str(), seconds * 1e3 / per);
  const double step_ms = steps.seconds * 1e3 / per;
  std::printf(
      "step       %10.3f ms; outside the busiest device's nodes (update, batches, executor) "
      "%.3f ms, of which the profiler's own about %.3f ms\n",
      step_ms, step_ms - busiest_device_seconds(profile) * 1e3 / per,
      profiler_seconds(profile) * 1e3 / per);
}

JsonReport training_profile_json(const NodeProfile& profile, const TrainingProfileSteps& steps) {
  const double per = static_cast<double>(std::max<int64_t>(steps.steps, 1));
  JsonReport out;
  out["steps"] = steps.steps;
  out["step_ms"] = steps.seconds * 1e3 / per;
  out["nodes_ms"] = profile.total_seconds() * 1e3 / per;
  out["outside_ms"] = (steps.seconds - busiest_device_seconds(profile)) * 1e3 / per;
  out["profiler_ms"] = profiler_seconds(profile) * 1e3 / per;
  out["devices"] = JsonReport::object();
  for (const auto& [device, seconds] : profile.by_device())
    out["devices"][device] = seconds * 1e3 / per;
  out["ops"] = JsonReport::array();
  for (const auto& [op, f] : slowest_ops(profile))
    out["ops"].push_back({{"op", op},
                          {"calls_per_step", static_cast<double>(f.calls) / per},
                          {"forward_ms", f.forward_seconds * 1e3 / per},
                          {"backward_ms", f.backward_seconds * 1e3 / per}});
  out["nodes"] = JsonReport::array();
  for (const NodeProfile::NodeFigures& n : profile.nodes())
    out["nodes"].push_back({{"op", n.op},
                            {"node", n.key},
                            {"phase", phase_name(n.phase)},
                            {"calls", n.calls},
                            {"ms_per_step", n.seconds * 1e3 / per},
                            {"input_shapes", n.input_shapes}});
  return out;
}

}  // namespace dprun::cli
