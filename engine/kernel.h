#pragma once
// The kernel interface and registry. Each kernel registers itself in one line in its own file:
//
//   DPRUN_REGISTER_KERNEL({.op_type = "Relu", .since = 6, .dtypes = kFloatTypes,
//                          .factory = make_kernel<ReluKernel>});
//
// Lookup picks, among the definitions for (domain, op_type, device type) whose version range
// contains the model's opset and whose dtypes accept the node's input, the one with the
// highest `since`, then the highest `priority`. A definition may decline a node, through its
// `accepts` predicate or by its factory returning nullptr (e.g. a oneDNN fast path for an
// attribute combination it does not cover); the next candidate is tried. Kernels are chosen
// when the Plan is built, never during a run.
#include <climits>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/execution_context.h"
#include "engine/graph.h"
#include "engine/tensor.h"

namespace dprun {

/// An ONNX sequence value (seq(tensor)). Values share sequences immutably: an op that changes
/// a sequence produces a new one.
using TensorSequence = std::vector<Tensor>;
using SequencePtr = std::shared_ptr<const TensorSequence>;

/// What a kernel factory knows about the node it is built for.
/// How a plan's kernels may compute (ModelOptions::plan carries them into a model's plan).
struct PlanOptions {
  /// Let float32 MatMul, Gemm, Conv and ConvTranspose on GPUs run on TF32 tensor cores: inputs
  /// rounded to a 10-bit mantissa, sums in float32 (PyTorch's allow_tf32). Several times the
  /// float32 speed, about 1e-3 relative error instead of 1e-6. No effect on CPU devices.
  bool allow_tf32 = false;
  /// Let float32 3x3 stride-1 convolutions on CPUs use oneDNN's Winograd F(4x4, 3x3)
  /// algorithm where the CPU has it (AVX-512): fewer multiplications, a larger rounding error
  /// (bounds in bench/README.md). No effect on GPUs.
  bool allow_winograd = false;
};

struct KernelInfo {
  const Node& node;
  int64_t opset;  // the model's opset for the node's domain
  DeviceType device_type;
  std::vector<std::optional<TensorType>> input_types;  // per input; nullopt when unknown
  /// Constant inputs (initializers that callers cannot override, and outputs of Constant
  /// nodes), keyed by input index.
  std::map<size_t, Tensor> constant_inputs;
  /// The graph that holds the node (for ops defined over their graph, such as Gradient);
  /// nullptr when a kernel is built outside a graph.
  const Graph* graph = nullptr;
  /// Outer-scope values the node's subgraphs read (control flow: If, Loop, Scan). They are
  /// passed to the kernel as extra inputs after the node's declared ones, in this order.
  std::vector<std::string> implicit_inputs;
  /// How the plan lets its kernels compute; kernels that build plans of their own (subgraphs)
  /// pass it on.
  PlanOptions plan_options;
};

class KernelContext;
class ReplicaGroup;

/// A kernel bound to one node. compute() is const and may run concurrently on several
/// replicas: all per-run state lives in the KernelContext.
class OpKernel {
 public:
  virtual ~OpKernel() = default;
  virtual void compute(KernelContext& ctx) const = 0;
};

using KernelFactory = std::function<std::unique_ptr<OpKernel>(const KernelInfo&)>;

/// One registration.
struct KernelDef {
  std::string domain;  // "" = ai.onnx
  std::string op_type;
  int64_t since = 1;        // first opset version covered
  int64_t until = INT_MAX;  // last opset version covered
  DeviceType device = DeviceType::CPU;
  std::vector<DType> dtypes;  // accepted dtypes of input `dtype_input`; empty = any
  int dtype_input = 0;
  int priority = 0;  // fast paths register above the reference (0)
  std::string impl = "reference";
  /// Inputs the kernel reads on the host wherever they live (shapes, axes, sizes, read through
  /// IntInputReader or read_int64_values): off the CPU, a value the plan keeps on the host
  /// (plan.h, shape arithmetic) is handed over as it is instead of copied to the device.
  std::vector<int> host_inputs = {};
  /// Inputs of which the kernel reads the dtype and dims only, never the data (Shape, Size):
  /// run on the host in a plan for another device, it gets them where they are, uncopied.
  std::vector<int> metadata_inputs = {};
  /// Whether the kernel takes the node, decided from `info` alone (attributes, known input
  /// types, constant inputs) without building anything; empty = every node its dtypes admit.
  /// Apart from the factory so that a plan can be made where the kernel cannot be built: the
  /// CUDA definitions (ops/cuda/defs) are compiled in every build, and the simulated devices
  /// follow their `accepts` (a CUDA definition's factory never declines).
  std::function<bool(const KernelInfo&)> accepts = {};
  KernelFactory factory;
  /// The source file that registered the definition (DPRUN_REGISTER_KERNEL sets it): the op
  /// units' check (tests/unit/op_units_test.cpp) reads it.
  std::string source = {};
};

template <class K>
std::unique_ptr<OpKernel> make_kernel(const KernelInfo& info) {
  return std::make_unique<K>(info);
}

inline const std::vector<DType> kFloatTypes = {DType::Float32, DType::Float64};
inline const std::vector<DType> kIntTypes = {DType::Int8,   DType::Int16, DType::Int32,
                                             DType::Int64,  DType::UInt8, DType::UInt16,
                                             DType::UInt32, DType::UInt64};
inline const std::vector<DType> kNumericTypes = {
    DType::Float32, DType::Float64, DType::Int8,   DType::Int16,  DType::Int32,
    DType::Int64,   DType::UInt8,   DType::UInt16, DType::UInt32, DType::UInt64};

/// The process-wide kernel table.
class KernelRegistry {
 public:
  static KernelRegistry& instance();
  /// Adds a definition, registered by the file `source` when given; returns true so it can
  /// initialise a static.
  bool add(KernelDef def, const char* source = nullptr);
  /// The definitions lookup tries for `info`, best first, without building a kernel: those
  /// for the node's domain, op and device whose opset range holds info.opset, of the highest
  /// `since` among them, whose dtypes accept the node's input type. `why` is set when the list is
  /// empty or a definition was passed over for the dtype. A definition listed here may still
  /// decline the node's attributes.
  std::vector<const KernelDef*> candidates(const KernelInfo& info, std::string* why = nullptr,
                                           const std::string& impl = "") const;
  /// Builds the kernel for `info`, or returns nullptr with `why` set when none fits.
  /// When `impl` is non-empty only definitions with that impl name are considered. `chosen`,
  /// when given, is set to the definition that built the kernel.
  std::unique_ptr<OpKernel> create(const KernelInfo& info, std::string* why = nullptr,
                                   const std::string& impl = "",
                                   const KernelDef** chosen = nullptr) const;
  /// True when any definition exists for (domain, op_type) on any device.
  bool knows_op(const std::string& domain, const std::string& op_type) const;
  /// Every registered definition (for listings and tests).
  const std::vector<KernelDef>& definitions() const { return defs_; }
  /// Calls `listener` with every definition added so far and with each one added later, in
  /// order of addition, whatever the order of static initialisation: for a backend whose
  /// kernels follow another's (the simulated device mirrors the CUDA backend's). The listener
  /// may add definitions; it is called for those too.
  void on_add(std::function<void(const KernelDef&)> listener);

 private:
  std::vector<KernelDef> defs_;
  std::vector<std::function<void(const KernelDef&)>> listeners_;
};

/// Per-invocation view of one node's inputs and outputs, owned by the executor. It refers to
/// the run's ExecutionContext, through which the kernel reaches its device's execution
/// resource: host threads on a CPU device, a stream and library handles on a GPU (a CUDA
/// kernel casts execution() to the CUDA backend's context type).
class KernelContext {
 public:
  KernelContext(const Node& node, ExecutionContext& execution,
                std::span<const Tensor* const> inputs, std::span<Tensor> outputs)
      : node_(node), execution_(execution), inputs_(inputs), outputs_(outputs) {}

  const Node& node() const { return node_; }
  Device device() const { return execution_.device(); }
  /// The run's execution resource on this device.
  ExecutionContext& execution() const { return execution_; }
  /// Intra-op threads this kernel may use.
  int threads() const { return execution_.threads(); }
  /// Runs fn(begin, end) over [0, n) on the run's intra-op threads
  /// (ExecutionContext::parallel_for).
  void parallel_for(int64_t n, int64_t grain,
                    const std::function<void(int64_t, int64_t)>& fn) const {
    execution_.parallel_for(n, grain, fn);
  }

  size_t input_count() const { return inputs_.size(); }
  bool has_input(size_t i) const { return i < inputs_.size() && inputs_[i] != nullptr; }
  /// A required input; throws naming the node when it is absent or a sequence.
  const Tensor& input(size_t i) const;
  /// An optional input, nullptr when omitted.
  const Tensor* optional_input(size_t i) const { return has_input(i) ? inputs_[i] : nullptr; }

  size_t output_count() const { return outputs_.size(); }
  /// False when the node's output name at `i` is empty or not consumed.
  bool output_wanted(size_t i) const {
    return i < wanted_.size() ? wanted_[i] : i < outputs_.size();
  }
  /// Allocates output i on this device and returns it for the kernel to fill.
  Tensor& allocate_output(size_t i, Shape shape, DType dtype);
  /// Output i written over input `input`'s memory when nothing else can see that memory: the
  /// input's value dies at this node (its last reader; never a graph input, output or
  /// parameter), no other input slot reads it, nothing else shares its storage, and it has
  /// exactly `shape` and `dtype`. Otherwise a new allocation, as allocate_output. Only for
  /// kernels that read each input element before writing the output element at the same
  /// position (elementwise maps); saves an allocation and, on memory-bound ops, the
  /// write-allocate traffic of a fresh buffer.
  Tensor& allocate_output_reusing(size_t i, size_t input, Shape shape, DType dtype);
  /// Whether allocate_output_reusing(_, input, shape, dtype) would write over the input.
  bool input_reusable(size_t input, const Shape& shape, DType dtype) const;
  /// Sets output i to an existing tensor (e.g. a reshaped view of an input).
  void set_output(size_t i, Tensor tensor);
  /// Output i as set so far; an undefined tensor before it is.
  const Tensor& output(size_t i) const { return outputs_[i]; }

  void set_wanted(std::vector<bool> wanted) { wanted_ = std::move(wanted); }
  /// Which input slots allocate_output_reusing may write over (PlanStep::inputs_released);
  /// none unless set. The vector must outlive the context (executor only).
  void set_released_inputs(const std::vector<bool>* released) { released_inputs_ = released; }

  /// Names the contents of the run's parameters: two runs with the same non-zero version see
  /// the same values in the same parameter storage, so a kernel may keep what it derives from
  /// a constant input (KernelInfo::constant_inputs), such as weights reordered for a library,
  /// keyed by this version and the input's address. 0: unknown; derive afresh.
  uint64_t parameters_version() const { return parameters_version_; }
  void set_parameters_version(uint64_t version) { parameters_version_ = version; }

  /// The group of replicas this run is one of (engine/parallel/replica_group.h), and this run's
  /// index in it; nullptr when the run is on its own (not one of a parallel_apply call).
  /// The seed of this node's random stream in this run (RunOptions::random_seed), for random
  /// ops without a seed attribute; nullopt: draw from fresh entropy.
  std::optional<uint64_t> random_seed() const { return random_seed_; }
  void set_random_seed(uint64_t seed) { random_seed_ = seed; }

  ReplicaGroup* replica_group() const { return replica_group_; }
  size_t replica_index() const { return replica_index_; }
  void set_replica(ReplicaGroup* group, size_t index) {
    replica_group_ = group;
    replica_index_ = index;
  }

  // Sequence values. Tensor accessors see a sequence input as absent (has_input is false).
  /// True when input i holds a sequence.
  bool input_is_sequence(size_t i) const {
    return i < input_sequences_.size() && input_sequences_[i] != nullptr;
  }
  /// Input i as a sequence, nullptr when it is not one (absent or a tensor).
  const TensorSequence* input_sequence(size_t i) const {
    return input_is_sequence(i) ? input_sequences_[i].get() : nullptr;
  }
  /// Input i as a shared sequence (to forward without copying); nullptr when not one.
  SequencePtr input_sequence_ptr(size_t i) const {
    return input_is_sequence(i) ? input_sequences_[i] : nullptr;
  }
  /// Sets output i to a sequence.
  void set_output_sequence(size_t i, TensorSequence sequence);
  void set_output_sequence(size_t i, SequencePtr sequence);
  /// Leaves output i empty on purpose: an optional without a value (ONNX Optional).
  void set_output_none(size_t i);
  /// The sequence set for output i, nullptr when none was.
  SequencePtr output_sequence(size_t i) const {
    return i < output_sequences_.size() ? output_sequences_[i] : nullptr;
  }
  bool output_is_none(size_t i) const { return i < none_.size() && none_[i]; }
  /// Gives the context the sequence slots of the inputs and outputs (executor only). Without
  /// it, the node can neither read nor produce sequences.
  void bind_sequences(std::span<const SequencePtr> inputs, std::span<SequencePtr> outputs) {
    input_sequences_ = inputs;
    output_sequences_ = outputs;
  }

  template <class... Args>
  [[noreturn]] void fail(const Args&... args) const {
    node_.fail(args...);
  }

 private:
  const Node& node_;
  ExecutionContext& execution_;
  std::span<const Tensor* const> inputs_;
  std::span<Tensor> outputs_;
  std::vector<bool> wanted_;
  const std::vector<bool>* released_inputs_ = nullptr;
  std::span<const SequencePtr> input_sequences_;
  std::span<SequencePtr> output_sequences_;
  std::vector<bool> none_;
  uint64_t parameters_version_ = 0;
  std::optional<uint64_t> random_seed_;
  ReplicaGroup* replica_group_ = nullptr;
  size_t replica_index_ = 0;
};

}  // namespace dprun

#define DPRUN_CONCAT_INNER(a, b) a##b
#define DPRUN_CONCAT(a, b) DPRUN_CONCAT_INNER(a, b)
/// Registers a KernelDef (given as a braced designated initializer) at static-init time.
#define DPRUN_REGISTER_KERNEL(...)                                                      \
  [[maybe_unused]] static const bool DPRUN_CONCAT(dprun_kernel_registered_, __LINE__) = \
      ::dprun::KernelRegistry::instance().add(::dprun::KernelDef __VA_ARGS__, __FILE__)
