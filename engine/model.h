#pragma once
// Model: a Graph compiled for a device, with its parameters placed on that device.
#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/backend.h"
#include "engine/executor.h"
#include "engine/plan.h"
#include "engine/plan_graphs.h"

namespace dprun {

struct ModelOptions {
  /// Let the device's backend apply its layout rewrite (GraphRewriteOptions::layout) before
  /// compiling. On CPU that is rewrite_channels_last (engine/backends/cpu/layout_rewrite.h):
  /// chains of convolutions and pools run in NHWC without per-op reorders. The environment
  /// variable DPRUN_NO_LAYOUT_REWRITE=1 turns it off for every model. Per-node observers see
  /// the rewritten nodes; turn it off to observe the original ones.
  bool channels_last = true;
  /// Let the device's backend fuse chains of ops into one kernel (GraphRewriteOptions::fusion).
  /// On CPU and CUDA that is fuse_ops (engine/rewrites/op_fusion.h): MatMul with its bias Add,
  /// and the erf form of GELU. The environment variable DPRUN_NO_FUSION=1 turns it off for every
  /// model.
  bool fuse_ops = true;
  /// How the plan's kernels may compute (PlanOptions: TF32 on GPUs, off by default).
  PlanOptions plan;
  /// Float32 runs the graph as it is. Float16 or BFloat16 converts it first
  /// (engine/rewrites/half_precision.h, float32 inputs and outputs kept): parameters and
  /// activations in 16 bits, products on 16-bit kernels where the backend has them. graph() is
  /// then the converted graph, so saving the model saves it in 16 bits.
  DType precision = DType::Float32;
};

class Model {
 public:
  /// Places the graph's initializers on `device` as parameters and compiles the plan.
  /// Throws Error listing every node without a kernel for that device. The plan may be
  /// compiled from a copy of `graph` rewritten by the device's backend (rewrite_for_device,
  /// see ModelOptions); graph() stays `graph`, or its 16-bit conversion with
  /// ModelOptions::precision.
  Model(std::shared_ptr<const Graph> graph, Device device, ModelOptions options = {});
  /// A model that shares `plan` (compiled for device.type) and uses `parameters` as-is.
  /// `version` is the parameter version counter; pass another model's (see
  /// shared_version()) when the parameters share its storage, so a change through either
  /// is seen by both. nullptr starts a new counter. `graph` is the model's original graph
  /// (another model's graph_ptr()); nullptr means the plan's own graph.
  /// `rewrite` is what plan_for() lets other backends do to `graph` (another model's
  /// rewrite_options()).
  Model(std::shared_ptr<const Plan> plan, Device device, std::vector<Tensor> parameters,
        std::shared_ptr<std::atomic<uint64_t>> version = nullptr,
        std::shared_ptr<const Graph> graph = nullptr, GraphRewriteOptions rewrite = {});

  /// The graph the model was created from (the plan may run a rewritten copy of it).
  const Graph& graph() const { return *graph_; }
  std::shared_ptr<const Graph> graph_ptr() const { return graph_; }
  std::shared_ptr<const Plan> plan() const { return plan_; }
  Device device() const { return device_; }
  /// The rewrites the model's options allow a backend (ModelOptions, the environment's
  /// DPRUN_NO_* switches applied).
  const GraphRewriteOptions& rewrite_options() const { return rewrite_; }
  /// graph() compiled for `device`'s type as a model of it made there would be (its backend's
  /// rewrites as rewrite_options() allow, the plan's options): plan() for this model's own
  /// type. A replica on a device of another type runs it. Throws as the device's backend does
  /// when the device cannot be used.
  std::shared_ptr<const Plan> plan_for(Device device) const;

  /// Runs on this model's device. `inputs` follow input_names(). Thread-safe with respect to
  /// other run() calls; the in-place state updates of concurrent runs race (last one wins).
  /// With DPRUN_CUDA_GRAPHS=1 on a device that captures graphs, runs whose inputs' shapes
  /// repeat are captured and replayed (engine/plan_graphs.h; not with overridden initializers).
  std::vector<Tensor> run(const std::vector<Tensor>& inputs, const RunOptions& options = {}) const;
  /// Runs with inputs by name; graph inputs that have an initializer may be given to override it.
  std::vector<Tensor> run(const std::map<std::string, Tensor>& inputs,
                          const RunOptions& options = {}) const;

  /// Names of the inputs a caller must feed, in order.
  std::vector<std::string> input_names() const;
  std::vector<std::string> output_names() const;
  /// Declared types of the fed inputs, in input_names() order.
  std::vector<TensorType> input_types() const;

  /// Parameters (initializers) in plan order, with their names.
  const std::vector<Tensor>& parameters() const { return parameters_; }
  std::vector<std::string> parameter_names() const;
  /// The parameter named `name`; throws when there is none.
  Tensor parameter(const std::string& name) const;
  /// Copies `value` into the parameter's storage (dtype and shape must match) and bumps the
  /// version. Not thread-safe with respect to run() or DataParallel::forward on this model:
  /// update parameters between calls.
  void set_parameter(const std::string& name, const Tensor& value);
  /// Changes whenever parameters change: set_parameter, mark_parameters_changed, or a run
  /// that performs in-place state updates. Replicas compare it to decide whether to copy
  /// again. Values are never reused within the process, so one version and one parameter
  /// storage always mean the same contents; runs pass it to kernels
  /// (KernelContext::parameters_version), which may cache what they derive from parameters.
  /// Whoever writes into parameters() storage directly must call mark_parameters_changed().
  uint64_t parameters_version() const { return version_->load(); }
  void mark_parameters_changed() const { version_->store(next_parameters_version()); }
  /// A process-wide fresh version (never 0).
  static uint64_t next_parameters_version();
  std::shared_ptr<std::atomic<uint64_t>> shared_version() const { return version_; }
  /// What DPRUN_CUDA_GRAPHS=1 has done for this model's runs (engine/plan_graphs.h).
  GraphStats graph_stats() const { return graphs_->stats(); }

 private:
  std::shared_ptr<const Graph> graph_;
  GraphRewriteOptions rewrite_;  // before plan_, which is compiled with it
  std::shared_ptr<const Plan> plan_;
  Device device_;
  std::vector<Tensor> parameters_;
  std::shared_ptr<std::atomic<uint64_t>> version_;
  // Its graphs read the parameters and the plan's kernels: declared after them, destroyed first.
  std::shared_ptr<PlanGraphs> graphs_ = std::make_shared<PlanGraphs>();
};

/// A model that runs `graph` (compiled for base's device) on base's parameter tensors and
/// version counter: every initializer of `graph` must be a parameter of `base`, by name.
/// Training and evaluation graphs built from base's graph run this way, so updates made
/// through either model are seen by both.
std::shared_ptr<Model> share_parameters(const Model& base, std::shared_ptr<const Graph> graph,
                                        ModelOptions options = {});

}  // namespace dprun
