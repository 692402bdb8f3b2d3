#pragma once
// Runs a Plan on one device with one set of parameter tensors. Holds no state between runs:
// every run gets its own value table, so one Plan serves many replicas and threads at once.
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/plan.h"

namespace dprun {

/// Per-node callbacks, PyTorch forward-hook style: `before` sees the node's inputs, `after`
/// its outputs. Called on the thread that runs the node, with that replica's device. They see
/// the nodes of the plan: with the channels-last rewrite (ModelOptions) convolution chains
/// appear as dprun-domain NHWC nodes and Transposes; compile with channels_last = false to
/// observe the original nodes and layouts. An elementwise node may write its output over an
/// input that dies there (KernelContext::allocate_output_reusing): an observer that needs an
/// input after `before` keeps a Tensor copy of it (a shared tensor is never written over), not
/// a pointer.
struct NodeObserver {
  std::function<void(const Node&, Device, std::span<const Tensor* const> inputs)> before;
  std::function<void(const Node&, Device, std::span<const Tensor> outputs)> after;
};

struct RunOptions {
  /// Intra-op threads; 0 keeps the calling thread's setting. Used only when the executor
  /// creates the run's execution context itself (no `context` given).
  int threads = 0;
  std::vector<NodeObserver> observers;
  /// The execution context to run on, created by the device's backend on the calling thread;
  /// nullptr makes the executor create one for the run (with `threads`). Either way the host
  /// does not wait for it: outputs, inputs and parameters carry the run's event (stream_order.h),
  /// and a caller that needs the device's work done synchronizes the context it passed.
  ExecutionContext* context = nullptr;
  /// The parameters' version (Model::parameters_version), passed to every kernel
  /// (KernelContext::parameters_version); 0 when unknown, so kernels cache nothing derived
  /// from the parameters. Model::run sets it.
  uint64_t parameters_version = 0;
  /// The replica group of a parallel_apply call and this run's index in it, for the kernels
  /// that combine values across replicas (KernelContext::replica_group); nullptr on its own.
  ReplicaGroup* replica_group = nullptr;
  size_t replica_index = 0;
  /// The seed of the run's random ops without a seed attribute (Dropout in training mode,
  /// RandomNormal, ...): each node draws from a stream derived from it and the node's
  /// position (KernelContext::random_seed), so a run with the same seed repeats. nullopt:
  /// fresh entropy on every run.
  std::optional<uint64_t> random_seed;
};

/// Executes `plan` on `device`. `parameters` follow plan.parameter_ids(); `feeds` follow
/// plan.feed_ids() (graph inputs without initializer, in declaration order). `overrides`
/// replaces parameters by name (graph inputs that also have an initializer).
/// Returns the graph outputs in declaration order. Throws Error naming the input on a dtype
/// or shape mismatch with the declared type, and naming the node when a kernel fails. Every
/// kernel of the run gets the same execution context (RunOptions::context).
std::vector<Tensor> execute_plan(const Plan& plan, Device device,
                                 const std::vector<Tensor>& parameters,
                                 const std::vector<Tensor>& feeds,
                                 const std::map<std::string, Tensor>& overrides,
                                 const RunOptions& options);

/// The steps of one run of `plan` on `execution` (a context of the run's device, current on the
/// calling thread), between the begin() and end() of the caller's RunOrder
/// (engine/stream_order.h): binds the parameters and the feeds (tensors, on the device already),
/// runs every step, applies the state updates and returns the outputs, on the device. What
/// execute_plan runs between its stream waits and its hand-over; the graph layer
/// (engine/plan_graphs.h) captures and replays it.
std::vector<Tensor> run_plan_steps(const Plan& plan, ExecutionContext& execution,
                                   const std::vector<Tensor>& parameters,
                                   const std::vector<Tensor>& feeds, const RunOptions& options);

/// A value of the executor's table: a tensor, a sequence, or neither (an omitted value or an
/// optional without element).
struct Value {
  Tensor tensor;
  SequencePtr sequence;
  bool is_sequence() const { return sequence != nullptr; }
  bool empty() const { return !tensor.defined() && !sequence; }
};

/// execute_plan over values that may be sequences, for running subgraphs (control-flow
/// kernels). `feeds` follow plan.feed_ids(); those past the graph's own inputs are the
/// outer-scope values the plan was built with. An empty feed is an optional without value.
/// Returns the graph outputs, possibly sequences or empty.
std::vector<Value> execute_plan_values(const Plan& plan, Device device,
                                       const std::vector<Tensor>& parameters,
                                       const std::vector<Value>& feeds,
                                       const std::map<std::string, Tensor>& overrides,
                                       const RunOptions& options);

/// Checks `tensor` against the declared type of graph input `info`; throws naming the input,
/// what was expected and what came.
void check_input(const ValueInfo& info, const Tensor& tensor);

}  // namespace dprun
