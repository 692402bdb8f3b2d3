#pragma once
// Reverse-mode differentiation as a graph transformation: from a forward Graph, the values to
// differentiate with respect to (xs), an output y and its gradient dY, build_gradient emits the
// backward pass as ordinary ONNX nodes (default domain). Appending them to the forward graph
// gives a training graph that any ONNX engine can run.
//
// Only floating values carry gradients: integer and bool values (Shape, Equal, Gather's
// indices, Cast to int...) cut the path, so the nodes that produce them need no rule and the
// integer inputs of a node (indices, shapes, conditions) get no gradient.
//
// Emitted nodes target the graph's ai.onnx opset (ops whose signature changed across versions,
// such as ReduceSum or Unsqueeze, are emitted in the form of that opset). Static shapes from
// Graph::value_types decide broadcasting reductions at build time where they can; otherwise a
// Shape/NonZero/ReduceSum composition decides them at run time (needs opset 13). A value
// without a declared shape gets one, or at least a rank, from its producer's inputs
// (engine/autograd/shape_propagation.h).
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "engine/autograd/gradient_registry.h"
#include "engine/graph.h"

namespace dprun {

struct GradientSpec {
  /// Values to differentiate with respect to: graph inputs, initializers or intermediate
  /// values. Each is treated as an independent leaf (paths through one x to another are cut).
  std::vector<std::string> xs;
  /// The value being differentiated.
  std::string y;
  /// Name of the value holding dL/dy (same shape as y); empty means ones shaped like y.
  std::string dy;
  /// Prefix of every emitted node and value name.
  std::string prefix = "grad/";
  /// When y does not depend on some x: emit zeros shaped like x (true) or leave its gradient
  /// name empty (false).
  bool zeros_for_unreachable = true;
  /// Differentiate a chain of nodes that computes one op as that op: layer normalization as
  /// exporters write it before opset 17 (engine/rewrites/layer_norm_fusion.h) gets
  /// LayerNormalization's rule, a few nodes where the chain's nine rules emit dozens; GELU's
  /// erf and tanh forms (engine/rewrites/gelu_fusion.h) get Gelu's, which a backend runs as one
  /// node.
  /// The gradients are the same functions; false keeps every node's own rule.
  bool differentiate_composites = true;
};

struct GradientResult {
  /// Backward nodes in topological order (they read forward values by name).
  std::vector<Node> nodes;
  /// One per x: the value holding dy/dx (contracted with dY); empty when unreachable and
  /// zeros were not requested.
  std::vector<std::string> gradients;
  /// Types of the backward nodes' outputs where their ops' rules give both dtype and shape.
  std::map<std::string, TensorType> value_types;
};

/// Builds the backward nodes. Throws Error naming the node when a node on a path from an x to
/// y has no gradient rule or its rule cannot handle it.
GradientResult build_gradient(const Graph& graph, const GradientSpec& spec);

class GradientBuilder;

/// `v` as a 0-d tensor of `dtype`, any numeric type (float16 and bfloat16 rounded from float to
/// nearest even): the constants gradient rules emit in the type of the values they combine.
Tensor scalar_tensor(double v, DType dtype);

/// What a gradient rule sees for one forward node, and how it emits nodes.
class GradientContext {
 public:
  GradientContext(GradientBuilder& builder, const Node& node, std::vector<std::string> go,
                  std::vector<bool> wants);

  const Node& node() const { return node_; }
  /// The graph's opset for the forward node's domain (what the node's semantics follow).
  int64_t opset() const;
  /// The ai.onnx opset the emitted nodes must conform to.
  int64_t onnx_opset() const;

  size_t input_count() const { return node_.inputs.size(); }
  size_t output_count() const { return node_.outputs.size(); }
  /// Forward input / output names ("" for an omitted optional one).
  const std::string& I(size_t i) const;
  const std::string& O(size_t i) const;
  /// Gradient of output i; "" when no gradient reaches it.
  const std::string& GO(size_t i) const;
  bool has_GO(size_t i) const { return !GO(i).empty(); }
  /// True when the builder needs the gradient of input i (it depends on an x and is float).
  bool wants_GI(size_t i) const { return i < wants_.size() && wants_[i]; }
  /// Records `value` as the gradient contribution of input i. Ignored when not wanted.
  void set_GI(size_t i, const std::string& value);
  const std::vector<std::string>& input_grads() const { return gi_; }

  /// Emits one node of the default domain and returns its single output.
  std::string emit(const std::string& op_type, std::vector<std::string> inputs,
                   std::map<std::string, Attribute> attrs = {});
  /// Emits one node of `domain` (imported by the forward graph) and returns its output.
  std::string emit_in(const std::string& domain, const std::string& op_type,
                      std::vector<std::string> inputs);
  /// Emits a node with `outputs` outputs and returns their names.
  std::vector<std::string> emit_n(const std::string& op_type, std::vector<std::string> inputs,
                                  size_t outputs, std::map<std::string, Attribute> attrs = {});
  /// A Constant node holding `t`.
  std::string constant(const Tensor& t);
  /// A 0-d constant `v` of `dtype` (a floating or integer type).
  std::string scalar(double v, DType dtype);
  /// A 1-D int64 constant.
  std::string ints(const std::vector<int64_t>& v);

  /// Declared or inferred type of a value; nullopt when unknown.
  std::optional<TensorType> type_of(const std::string& value) const;
  /// Element type of a value: declared, or inferred from its producer. Throws when unknown.
  DType dtype_of(const std::string& value) const;
  /// Rank of a value when known.
  std::optional<int64_t> rank_of(const std::string& value) const;
  /// Rank of a value; throws naming the node and value when unknown.
  int64_t require_rank(const std::string& value) const;
  /// The value of a constant (non-overridable initializer or Constant node output).
  std::optional<Tensor> constant_value(const std::string& value) const;

  // Opset-aware building blocks.
  /// Sums `g` (shaped like `g_shape` when known, else unknown) down to the shape of `target`,
  /// undoing numpy broadcasting.
  std::string reduce_to_shape_of(const std::string& g, std::optional<SymbolicShape> g_shape,
                                 const std::string& target);
  /// reduce_to_shape_of with g shaped like forward output `out`.
  std::string unbroadcast(const std::string& g, const std::string& out, const std::string& target);
  /// ReduceSum over static axes.
  std::string reduce_sum(const std::string& x, const std::vector<int64_t>& axes, bool keepdims);
  std::string unsqueeze(const std::string& x, const std::vector<int64_t>& axes);
  std::string squeeze(const std::string& x, const std::vector<int64_t>& axes);
  /// Reshape `x` to the runtime shape of `like`.
  std::string reshape_like(const std::string& x, const std::string& like);
  std::string cast(const std::string& x, DType to);

  template <class... Args>
  [[noreturn]] void fail(const Args&... args) const {
    ::dprun::fail(node_.describe(), ": gradient: ", args...);
  }

 private:
  GradientBuilder& builder_;
  const Node& node_;
  std::vector<std::string> go_;
  std::vector<bool> wants_;
  std::vector<std::string> gi_;
};

}  // namespace dprun
