#include "engine/node_profile.h"

#include <memory>

#include "engine/backend.h"
#include "engine/shape.h"

namespace dprun {
namespace {

std::string node_key(const Node& node) {
  return node.outputs.empty() ? node.name : node.outputs[0];
}

std::string shapes_of(std::span<const Tensor* const> inputs) {
  std::string shapes;
  for (const Tensor* t : inputs) {
    if (!shapes.empty()) shapes += ' ';
    shapes += t ? shape_to_string(t->shape()) : std::string("-");
  }
  return shapes;
}

// Each thread runs one node at a time: its start is the thread's own.
std::chrono::steady_clock::time_point& started() {
  thread_local std::chrono::steady_clock::time_point t;
  return t;
}

}  // namespace

NodeObserver NodeProfile::observer() {
  NodeObserver obs;
  obs.before = [this](const Node& node, Device device, std::span<const Tensor* const> inputs) {
    if (!recording()) return;
    // The clock measures the node's work on the device: the host waits on both sides of it.
    backend_for(device).synchronize(device);
    std::lock_guard lock(mutex_);
    const std::string key = node_key(node);
    if (!index_.count(key)) {
      index_[key] = nodes_.size();
      nodes_.push_back({node.op_type, key, shapes_of(inputs), phase_of(node), 0, 0.0});
    }
    started() = std::chrono::steady_clock::now();
  };
  obs.after = [this](const Node& node, Device device, std::span<const Tensor>) {
    if (!recording()) return;
    backend_for(device).synchronize(device);
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started()).count();
    std::lock_guard lock(mutex_);
    auto it = index_.find(node_key(node));
    if (it == index_.end()) return;  // recording began while the node ran
    NodeFigures& n = nodes_[it->second];
    n.calls += 1;
    n.seconds += s;
    OpFigures& op = by_op_[node.op_type];
    op.calls += 1;
    (n.phase == Phase::Backward ? op.backward_seconds : op.forward_seconds) += s;
    by_device_[device.to_string()] += s;
  };
  return obs;
}

void NodeProfile::set_recording(bool on) {
  std::lock_guard lock(mutex_);
  recording_ = on;
}

bool NodeProfile::recording() const {
  std::lock_guard lock(mutex_);
  return recording_;
}

std::map<std::string, NodeProfile::OpFigures> NodeProfile::by_op() const {
  std::lock_guard lock(mutex_);
  return by_op_;
}

std::vector<NodeProfile::NodeFigures> NodeProfile::nodes() const {
  std::lock_guard lock(mutex_);
  std::vector<NodeFigures> called;
  for (const NodeFigures& n : nodes_)
    if (n.calls > 0) called.push_back(n);
  return called;
}

std::map<std::string, double> NodeProfile::by_device() const {
  std::lock_guard lock(mutex_);
  return by_device_;
}

double NodeProfile::total_seconds() const {
  std::lock_guard lock(mutex_);
  double total = 0;
  for (const auto& [device, seconds] : by_device_) total += seconds;
  return total;
}

NodeProfile::Phase NodeProfile::phase_of(const Node& node) {
  auto backward = [](const std::string& name) { return name.rfind("grad/", 0) == 0; };
  return backward(node.name) || (!node.outputs.empty() && backward(node.outputs[0]))
             ? Phase::Backward
             : Phase::Forward;
}

double NodeProfile::cost_per_node() {
  NodeProfile probe;
  NodeObserver obs = probe.observer();
  Node node;
  node.op_type = "Identity";
  node.outputs = {"probe"};
  constexpr int kCalls = 2000;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < kCalls; ++i) {
    obs.before(node, Device::cpu(), {});
    obs.after(node, Device::cpu(), {});
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / kCalls;
}

}  // namespace dprun
