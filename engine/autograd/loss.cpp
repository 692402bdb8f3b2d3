#include "engine/autograd/loss.h"

#include <numeric>
#include <vector>

#include "engine/autograd/gradient_builder.h"
#include "engine/error.h"

namespace dprun {

namespace {

constexpr const char* kPrefix = "loss/";

/// Appends nodes to a graph under the loss/ prefix.
class LossEmitter {
 public:
  explicit LossEmitter(Graph& graph) : graph_(graph) {}

  std::string emit(const std::string& op, std::vector<std::string> inputs,
                   std::map<std::string, Attribute> attrs = {}) {
    Node n;
    n.name = kPrefix + op + "_" + std::to_string(count_++);
    n.op_type = op;
    n.inputs = std::move(inputs);
    n.outputs = {n.name};
    n.attributes = std::move(attrs);
    graph_.nodes.push_back(n);
    return n.outputs[0];
  }

  std::string scalar(double v, DType dtype) {
    Tensor t = Tensor::scalar<double>(v);
    if (dtype == DType::Float32) t = Tensor::scalar<float>(static_cast<float>(v));
    DPRUN_CHECK(dtype == DType::Float32 || dtype == DType::Float64, "loss: ", dtype_name(dtype),
                " losses are not supported (float32 and float64 are)");
    return constant(t);
  }

  std::string mean_of_all(const std::string& x) {
    return emit("ReduceMean", {x}, {{"keepdims", Attribute::of_int(0)}});
  }

  std::string sum_of_all(const std::string& x) {
    return emit("ReduceSum", {x}, {{"keepdims", Attribute::of_int(0)}});
  }

  std::string constant(Tensor value) {
    return emit("Constant", {}, {{"value", Attribute::of_tensor(std::move(value))}});
  }

  std::string int64_vector(std::vector<int64_t> values) {
    const auto n = static_cast<int64_t>(values.size());
    return constant(Tensor::from_vector<int64_t>({n}, values));
  }

 private:
  Graph& graph_;
  int count_ = 0;
};

struct OutputInfo {
  std::string name;
  DType dtype = DType::Float32;
  std::optional<SymbolicShape> shape;
};

OutputInfo find_output(const Graph& graph, const std::string& requested) {
  DPRUN_CHECK(!graph.outputs.empty(), "loss: the model has no outputs");
  std::string name = requested.empty() ? graph.outputs[0].name : requested;
  bool is_output = false;
  for (const auto& out : graph.outputs) is_output |= out.name == name;
  DPRUN_CHECK(is_output, "loss: the model has no output named '", name, "'");
  auto type = graph.type_of(name);
  OutputInfo info{name, DType::Float32, std::nullopt};
  if (type) {
    info.dtype = type->dtype;
    info.shape = type->shape;
  }
  DPRUN_CHECK(info.dtype == DType::Float32 || info.dtype == DType::Float64, "loss: output '", name,
              "' is ", dtype_name(info.dtype), "; a loss needs float32 or float64");
  return info;
}

/// The class scores as the ONNX loss ops read them, [N, C, ...], and how the target reaches
/// them.
struct ClassScores {
  std::string scores;
  /// The target's declared shape: the output's without the class dim.
  std::optional<SymbolicShape> target_shape;
  /// The scores are the output's rows [positions, C] (classes the last of three or more dims,
  /// their count known): the target is read flattened to [positions]. The loss is the same
  /// mean over the same positions; the classes stay contiguous, with no Transpose either way.
  bool flat = false;
};

/// Brings the class dim of `info` to position 1: a Transpose, or for classes in the last dim a
/// Reshape into rows (ClassScores::flat).
ClassScores classes_at_dim_1(LossEmitter& emit, const OutputInfo& info, int64_t class_dim) {
  if (!info.shape) {
    DPRUN_CHECK(class_dim == 1, "loss: output '", info.name, "' has an unknown rank, so class dim ",
                class_dim, " cannot be moved to dim 1");
    return {info.name, std::nullopt};
  }
  auto rank = static_cast<int64_t>(info.shape->size());
  DPRUN_CHECK(rank >= 2, "loss: output '", info.name, "' has rank ", rank,
              "; class scores need [batch, classes, ...]");
  int64_t c = class_dim < 0 ? class_dim + rank : class_dim;
  DPRUN_CHECK(c >= 1 && c < rank, "loss: class dim ", class_dim, " is out of range for output '",
              info.name, "' of rank ", rank, " (the batch dim 0 cannot hold the classes)");
  SymbolicShape target;
  for (int64_t d = 0; d < rank; ++d)
    if (d != c) target.push_back((*info.shape)[static_cast<size_t>(d)]);
  if (c == 1) return {info.name, target};
  const Dim& classes = (*info.shape)[static_cast<size_t>(c)];
  if (c == rank - 1 && classes.is_known())
    return {emit.emit("Reshape", {info.name, emit.int64_vector({-1, classes.value})}), target,
            true};
  // [N, d1, .., C, ..] -> [N, C, d1, ..]: the order of the other dims is kept.
  std::vector<int64_t> perm = {0, c};
  for (int64_t d = 1; d < rank; ++d)
    if (d != c) perm.push_back(d);
  return {emit.emit("Transpose", {info.name}, {{"perm", Attribute::of_ints(perm)}}), target};
}

std::string add_target_input(Graph& graph, DType dtype, std::optional<SymbolicShape> shape) {
  const std::string name = "target";
  for (const auto& in : graph.inputs)
    DPRUN_CHECK(in.name != name, "loss: the model already has an input named 'target'");
  graph.inputs.push_back({name, TensorType{dtype, std::move(shape)}});
  return name;
}

/// The positions a class loss averages over: 1 where the target is not ignored, else 0
/// (`kept`), and their count, at least 1 (`count`: a chunk whose targets are all ignored
/// averages to 0, not to 0/0).
struct KeptPositions {
  std::string kept, count;
};

KeptPositions kept_positions(LossEmitter& emit, DType dtype, const std::string& target,
                             int64_t ignore_index) {
  const std::string ignored =
      emit.emit("Equal", {target, emit.constant(Tensor::scalar<int64_t>(ignore_index))});
  const std::string kept = emit.emit("Cast", {emit.emit("Not", {ignored})},
                                     {{"to", Attribute::of_int(static_cast<int64_t>(dtype))}});
  return {kept, emit.emit("Max", {emit.sum_of_all(kept), emit.scalar(1, dtype)})};
}

/// (1 - s) * `loss` + s * the mean, over the positions whose target is not ignored, of
/// -mean_c log_softmax(scores)[n, c, ...]: PyTorch's cross_entropy with label_smoothing s.
std::string smoothed(LossEmitter& emit, int64_t opset, DType dtype, const std::string& loss,
                     const std::string& scores, const std::optional<KeptPositions>& kept,
                     const LossSpec& spec) {
  const std::string log_probs = emit.emit("LogSoftmax", {scores}, {{"axis", Attribute::of_int(1)}});
  // The mean over the classes (dim 1); ReduceMean takes its axes as an input from opset 18.
  const std::string class_mean =
      opset >= 18
          ? emit.emit("ReduceMean", {log_probs, emit.int64_vector({1})},
                      {{"keepdims", Attribute::of_int(0)}})
          : emit.emit("ReduceMean", {log_probs},
                      {{"axes", Attribute::of_ints({1})}, {"keepdims", Attribute::of_int(0)}});
  const std::string per_position = emit.emit("Neg", {class_mean});
  // Positions of an ignored target count for nothing, and the mean is over the others.
  const std::string smooth =
      kept ? emit.emit("Div",
                       {emit.sum_of_all(emit.emit("Mul", {per_position, kept->kept})), kept->count})
           : emit.mean_of_all(per_position);
  const double s = spec.label_smoothing;
  return emit.emit("Add", {emit.emit("Mul", {loss, emit.scalar(1 - s, dtype)}),
                           emit.emit("Mul", {smooth, emit.scalar(s, dtype)})});
}

std::string class_loss(Graph& graph, LossEmitter& emit, const OutputInfo& info,
                       const LossSpec& spec, std::string& target) {
  int64_t opset = graph.opset("");
  const char* op =
      spec.kind == LossKind::CrossEntropy ? "SoftmaxCrossEntropyLoss" : "NegativeLogLikelihoodLoss";
  DPRUN_CHECK(opset >= 12, "loss: ", loss_kind_name(spec.kind),
              " needs ai.onnx opset 12 or newer (", op, "); the model imports opset ", opset);
  DPRUN_CHECK(spec.label_smoothing >= 0 && spec.label_smoothing <= 1, "loss: label smoothing ",
              spec.label_smoothing, " is not between 0 and 1");
  DPRUN_CHECK(spec.label_smoothing == 0 || spec.kind == LossKind::CrossEntropy,
              "loss: label smoothing is cross_entropy's, not ", loss_kind_name(spec.kind), "'s");
  const ClassScores classes = classes_at_dim_1(emit, info, spec.class_dim);
  const std::string& scores = classes.scores;
  target = add_target_input(graph, DType::Int64, classes.target_shape);
  const std::string labels =
      classes.flat ? emit.emit("Reshape", {target, emit.int64_vector({-1})}) : target;
  std::map<std::string, Attribute> attrs = {{"reduction", Attribute::of_string("mean")}};
  std::optional<KeptPositions> kept;
  if (spec.ignore_index) {
    // The sum over the kept positions divided by their count: the op's mean, except that a
    // chunk with every target ignored gives 0 instead of NaN.
    attrs["ignore_index"] = Attribute::of_int(*spec.ignore_index);
    attrs["reduction"] = Attribute::of_string("sum");
    kept = kept_positions(emit, info.dtype, labels, *spec.ignore_index);
  }
  std::string loss = emit.emit(op, {scores, labels}, attrs);
  if (kept) loss = emit.emit("Div", {loss, kept->count});
  if (spec.label_smoothing == 0) return loss;
  DPRUN_CHECK(opset >= 13,
              "loss: label smoothing needs ai.onnx opset 13 or newer (LogSoftmax "
              "over dim 1); the model imports opset ",
              opset);
  return smoothed(emit, opset, info.dtype, loss, scores, kept, spec);
}

std::string regression_loss(Graph& graph, LossEmitter& emit, const OutputInfo& info, LossKind kind,
                            std::string& target) {
  target = add_target_input(graph, info.dtype, info.shape);
  if (kind == LossKind::BceWithLogits) {
    // max(x, 0) - x * t + log(1 + exp(-|x|)): PyTorch's numerically stable form.
    std::string x = info.name;
    std::string softplus = emit.emit(
        "Log", {emit.emit("Add", {emit.scalar(1, info.dtype),
                                  emit.emit("Exp", {emit.emit("Neg", {emit.emit("Abs", {x})})})})});
    std::string linear = emit.emit("Sub", {emit.emit("Relu", {x}), emit.emit("Mul", {x, target})});
    return emit.mean_of_all(emit.emit("Add", {linear, softplus}));
  }
  std::string diff = emit.emit("Sub", {info.name, target});
  std::string per_element =
      kind == LossKind::Mse ? emit.emit("Mul", {diff, diff}) : emit.emit("Abs", {diff});
  return emit.mean_of_all(per_element);
}

}  // namespace

LossKind parse_loss_kind(const std::string& text) {
  if (text == "cross_entropy") return LossKind::CrossEntropy;
  if (text == "nll") return LossKind::Nll;
  if (text == "mse") return LossKind::Mse;
  if (text == "l1") return LossKind::L1;
  if (text == "bce_with_logits") return LossKind::BceWithLogits;
  if (text == "none") return LossKind::None;
  fail("unknown loss '", text, "' (expected cross_entropy, nll, mse, l1, bce_with_logits or none)");
}

std::string loss_kind_name(LossKind kind) {
  switch (kind) {
    case LossKind::CrossEntropy:
      return "cross_entropy";
    case LossKind::Nll:
      return "nll";
    case LossKind::Mse:
      return "mse";
    case LossKind::L1:
      return "l1";
    case LossKind::BceWithLogits:
      return "bce_with_logits";
    case LossKind::None:
      return "none";
  }
  return "?";
}

bool loss_needs_target(LossKind kind) {
  return kind != LossKind::None;
}

LossNodes append_loss(Graph& graph, const LossSpec& spec) {
  OutputInfo info = find_output(graph, spec.output);
  LossEmitter emit(graph);
  LossNodes result;
  result.dtype = info.dtype;
  switch (spec.kind) {
    case LossKind::CrossEntropy:
    case LossKind::Nll:
      result.loss = class_loss(graph, emit, info, spec, result.target);
      result.ignored_target = spec.ignore_index;
      break;
    case LossKind::Mse:
    case LossKind::L1:
    case LossKind::BceWithLogits:
      result.loss = regression_loss(graph, emit, info, spec.kind, result.target);
      break;
    case LossKind::None:
      // A 0-d loss passes through; one value per sample is averaged over the batch.
      result.loss = emit.mean_of_all(info.name);
      break;
  }
  graph.value_types[result.loss] = TensorType{info.dtype, SymbolicShape{}};
  return result;
}

}  // namespace dprun
