#pragma once
// Plan: the immutable result of compiling a Graph for one device type — execution order,
// the kernel chosen for each node, and when each intermediate value dies. Shared by every
// replica on devices of that type. On a device type other than the CPU, a node without a
// kernel for it runs on the host with its CPU kernel (the executor copies its inputs to the
// host and its outputs back), and so does shape arithmetic: nodes that compute small integer
// tensors from tensor shapes (Shape, then Gather, Unsqueeze, Concat, ...) run on the host and
// keep their results there, so that a Reshape or Expand on the device reads its target shape
// without waiting for the device.
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/graph.h"
#include "engine/kernel.h"

namespace dprun {

struct PlanStep {
  size_t node_index;  // into graph().nodes
  std::unique_ptr<OpKernel> kernel;
  /// Where the kernel runs: the plan's device type, or CPU for a node that has no kernel
  /// there (a host fallback).
  DeviceType kernel_device = DeviceType::CPU;
  /// For a kernel off the CPU that accepts only `device_dtypes` for input `dtype_input`, where
  /// the graph does not give that input's dtype (a value no inference reached, such as the
  /// integer counts of a gradient graph): the node's CPU kernel, which a run that feeds
  /// another dtype runs as a host fallback. Null otherwise.
  std::unique_ptr<OpKernel> host_kernel;
  std::vector<DType> device_dtypes;
  int dtype_input = 0;
  std::vector<int> inputs;           // value ids; -1 for an omitted optional input
  std::vector<int> outputs;          // value ids; -1 for an omitted output
  std::vector<bool> outputs_wanted;  // an output nobody reads need not be computed
  std::vector<int> release_after;    // values whose last reader is this step
  /// Per input slot: its value is released after this step and no other slot of the step
  /// reads it, so the kernel may write an output over it (KernelContext::allocate_output_reusing).
  std::vector<bool> inputs_released;
  /// Outer-scope values read by the node's subgraphs; their ids close `inputs`.
  std::vector<std::string> implicit_inputs;
  /// Per input slot: hand the value to the kernel wherever it lives. Set for a device kernel's
  /// KernelDef::host_inputs and a host kernel's metadata_inputs; any other input of a step off
  /// the plan's device type is moved to where its kernel runs. Empty: no such slot.
  std::vector<bool> inputs_in_place;
  /// Off the CPU: the node is shape arithmetic (place_shape_arithmetic), run by its CPU kernel
  /// on values kept on the host; its outputs stay there.
  bool shape_arithmetic = false;
  /// Host copies of constant inputs by slot (initializers callers cannot override, Constant
  /// outputs), read instead of their device copies: every constant input of shape arithmetic,
  /// and the constants a device kernel reads on the host (KernelDef::host_inputs).
  std::map<size_t, Tensor> host_constants;
};

class Plan {
 public:
  /// Compiles `graph` (already topologically sorted) for `device_type`. Every node without a
  /// kernel (on `device_type`, nor on the CPU as a fallback) is reported in one Error, with
  /// node names and reasons. A subgraph names the
  /// outer-scope values it reads in `outer_values`: they are fed after its own inputs.
  /// `options` reach every kernel (KernelInfo) and the subgraphs' plans.
  static std::shared_ptr<const Plan> build(std::shared_ptr<const Graph> graph,
                                           DeviceType device_type,
                                           const std::vector<std::string>& outer_values = {},
                                           const PlanOptions& options = {});

  const Graph& graph() const { return *graph_; }
  std::shared_ptr<const Graph> graph_ptr() const { return graph_; }
  DeviceType device_type() const { return device_type_; }
  const PlanOptions& options() const { return options_; }
  const std::vector<PlanStep>& steps() const { return steps_; }
  size_t value_count() const { return value_names_.size(); }
  const std::string& value_name(int id) const { return value_names_[static_cast<size_t>(id)]; }
  /// -1 when no such value.
  int value_id(const std::string& name) const;
  /// Graph inputs a caller feeds (without initializer), in declaration order, then the
  /// outer-scope values of a subgraph plan.
  const std::vector<int>& feed_ids() const { return feed_ids_; }
  /// Initializers, in a fixed order; a Model's parameter tensors follow it.
  const std::vector<int>& parameter_ids() const { return parameter_ids_; }
  const std::vector<int>& output_ids() const { return output_ids_; }

 private:
  std::shared_ptr<const Graph> graph_;
  DeviceType device_type_ = DeviceType::CPU;
  PlanOptions options_;
  std::vector<PlanStep> steps_;
  std::vector<std::string> value_names_;
  std::unordered_map<std::string, int> value_ids_;
  std::vector<int> feed_ids_, parameter_ids_, output_ids_;
};

/// Where one node of a graph would run when the graph is compiled for a device type.
struct NodePlacement {
  const Node* node = nullptr;
  /// The device type of its kernel: the requested one, CPU as a fallback, or none.
  std::optional<DeviceType> device;
  /// Why the requested device type has no kernel for it (empty when it has one).
  std::string why_not;
  /// Set for a node the device type has a kernel for that runs on the host as shape arithmetic
  /// (PlanStep::shape_arithmetic); `device` is then CPU.
  bool shape_arithmetic = false;
  /// For a node on the requested device whose input `dtype_input` has no dtype in the graph:
  /// the dtypes its kernel there takes; a run that feeds another runs the node on the CPU
  /// (PlanStep::host_kernel). Empty otherwise.
  std::vector<DType> device_dtypes;
  int dtype_input = 0;
};

/// The placement of every node of `graph` (in graph order) when it is compiled for
/// `device_type`, as Plan::build chooses it.
std::vector<NodePlacement> place_nodes(const Graph& graph, DeviceType device_type);

}  // namespace dprun
