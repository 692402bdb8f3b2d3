#pragma once
// Per-op facts other than kernels and gradient rules: the element type of an op's outputs, how
// its output shapes follow from its inputs, whether it stays in float32 in a 16-bit model,
// whether it runs unchanged on channels-last (NHWC) values and whether it draws random numbers.
// Each op registers its facts once, in the file of its reference CPU kernel (ops/<family>/),
// beside its DPRUN_REGISTER_KERNEL lines:
//
//   DPRUN_REGISTER_OP_FACTS({.op_type = "Relu", .shape = ShapeKind::SameAsInput0,
//                            .layout = kLayoutUnary});
//
// An op without a registration gets the defaults of OpFacts below: outputs of input 0's type,
// no shape rule, converted to 16 bits, not layout-agnostic, not random. Readers: the gradient
// builder (output types, and so which values are differentiable; random ops are never folded
// as constants), shape propagation (engine/autograd/shape_propagation.cpp), the 16-bit
// conversion (engine/rewrites/half_precision.cpp), the CPU channels-last rewrite
// (engine/backends/cpu/layout_rewrite.cpp) and `dprun ops`.
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/dtype.h"
#include "engine/graph.h"
#include "engine/layout_rule.h"

namespace dprun {

/// The element type of a node's outputs, as far as it follows from the op's schema.
struct OutputDTypeRule {
  enum class Kind {
    SameAsInput,      // the type of the first present (non-empty) input from `input` on
    Fixed,            // `dtype`, for every output
    FixedAfterFirst,  // output 0 as SameAsInput; every later output `dtype` (indices, masks)
    FromAttribute,    // the integer attribute `attribute` (an ONNX TensorProto type); when the
                      // node has none, `dtype`, or as SameAsInput where `dtype` is Undefined
    Unknown,          // cannot be told from the node (ops with subgraphs: If, Loop, Scan)
  };
  Kind kind = Kind::SameAsInput;
  int input = 0;
  DType dtype = DType::Undefined;
  const char* attribute = nullptr;

  static constexpr OutputDTypeRule same_as_input(int k) { return {Kind::SameAsInput, k}; }
  static constexpr OutputDTypeRule fixed(DType t) { return {Kind::Fixed, 0, t}; }
  static constexpr OutputDTypeRule fixed_after_first(DType t) {
    return {Kind::FixedAfterFirst, 0, t};
  }
  static constexpr OutputDTypeRule from_attribute(const char* name,
                                                  DType fallback = DType::Undefined) {
    return {Kind::FromAttribute, 0, fallback, name};
  }
  static constexpr OutputDTypeRule unknown() { return {Kind::Unknown}; }
  bool operator==(const OutputDTypeRule& other) const;
};

/// The element type of the node's input `i` (present or not), nullopt when unknown.
using InputDType = std::function<std::optional<DType>(size_t i)>;
/// An op's own type rule, where OutputDTypeRule cannot say it (Cast's `to`, QuantizeLinear's
/// zero point, LayerNormalization's statistics, Constant's value): the type of output
/// `output`, nullopt when unknown. It replaces the OutputDTypeRule entirely.
using DTypeFunction = std::optional<DType> (*)(const Node& node, size_t output,
                                               const InputDType& input_dtype);

/// The type of the first present input of `node` from `from` on; nullopt when there is none.
std::optional<DType> first_present_input_dtype(const Node& node, size_t from,
                                               const InputDType& input_dtype);

/// How the shapes of an op's outputs follow from its inputs (engine/autograd/shape_propagation.h).
enum class ShapeKind {
  None,          // no generic rule (then only `shape_rule`, when set, tells)
  SameAsInput0,  // output 0 has input 0's shape (elementwise, normalizations)
  Broadcast,     // output 0 is the numpy broadcast of all inputs
  // [N, C, D1, ...] in and out: rank and batch from X, spatial dims unknown, and channels
  Convolution,            // from W's dim 0 (Conv, ConvInteger)
  TransposedConvolution,  // W's dim 1 times `group` (ConvTranspose)
  Pool,                   // X's, for every output (MaxPool's Indices have Y's shape)
  GlobalPool,             // X's, spatial dims 1
  SameRank,               // input 0's rank, dims unknown (they depend on values or attributes)
  ReduceAxes,  // input 0 without the axes of input 1 or `axes` (or with them as 1: keepdims)
  ReduceAxis,  // input 0 without the `axis` attribute's axis (or with it as 1: keepdims)
};

struct ShapeQuery;  // engine/autograd/shape_rules.h
/// An op's own shape rule: the shape of output `query.output`, nullopt when it cannot be told.
/// It replaces the ShapeKind.
using ShapeRule = std::optional<SymbolicShape> (*)(const ShapeQuery& query);

/// One op's facts. Every field has the default an op without a registration gets.
struct OpFacts {
  std::string domain;  // "" = ai.onnx
  std::string op_type;
  /// The type of the outputs; default: input 0's (the first present input's).
  OutputDTypeRule dtype = {};
  /// When set, decides the output types instead of `dtype`.
  DTypeFunction dtype_function = nullptr;
  /// The output shapes' rule (ai.onnx ops only); default: none, shapes unknown.
  ShapeKind shape = ShapeKind::None;
  /// When set, decides the output shapes instead of `shape`.
  ShapeRule shape_rule = nullptr;
  /// Kept in float32 when a model is converted to float16/bfloat16 (reason at the
  /// registration); default: converted.
  bool float32_only = false;
  /// How it runs on channels-last values (engine/layout_rule.h); default: it needs NCHW.
  LayoutRule layout = {};
  /// Draws random numbers: never evaluated as a constant while building a gradient graph.
  bool random = false;
  /// Its output 0 holds input 0's values, rearranged or retyped (Reshape, Transpose, Cast):
  /// `dprun run` follows generated index values through such ops to bound them.
  bool keeps_values = false;
  /// The source file that registered the facts (DPRUN_REGISTER_OP_FACTS sets it).
  std::string source = {};

  /// The type of output `output` of `node` by this op's rule; nullopt when unknown.
  std::optional<DType> output_dtype(const Node& node, size_t output,
                                    const InputDType& input_dtype) const;
};

/// The process-wide facts table, keyed by (domain, op_type).
class OpFactsRegistry {
 public:
  static OpFactsRegistry& instance();
  /// Adds an op's facts, registered by the file `source` when given; returns true so it can
  /// initialise a static. A second registration of
  /// the same op is kept out and recorded in duplicates() (a test checks there is none).
  bool add(OpFacts facts, const char* source = nullptr);
  /// The op's registered facts, nullptr when it has none.
  const OpFacts* find(const std::string& domain, const std::string& op_type) const;
  /// The op's facts, or the defaults (a default-constructed OpFacts) when it has none.
  const OpFacts& get(const std::string& domain, const std::string& op_type) const;
  /// Every registration, ordered by (domain, op_type).
  std::vector<const OpFacts*> definitions() const;
  /// "domain op_type" of each registration that repeated an earlier one.
  const std::vector<std::string>& duplicates() const { return duplicates_; }

 private:
  std::map<std::pair<std::string, std::string>, OpFacts> facts_;
  std::vector<std::string> duplicates_;
};

/// The facts of `node`'s op (defaults when it has none).
const OpFacts& op_facts(const Node& node);

}  // namespace dprun

#define DPRUN_FACTS_CONCAT_INNER(a, b) a##b
#define DPRUN_FACTS_CONCAT(a, b) DPRUN_FACTS_CONCAT_INNER(a, b)
/// Registers an OpFacts (given as a braced designated initializer) at static-init time.
#define DPRUN_REGISTER_OP_FACTS(...)                                                            \
  [[maybe_unused]] static const bool DPRUN_FACTS_CONCAT(dprun_op_facts_registered_, __LINE__) = \
      ::dprun::OpFactsRegistry::instance().add(::dprun::OpFacts __VA_ARGS__, __FILE__)
