// The op case tables (ops/<family>/*_cases.cpp) reused for the gradient rules: each case of an op
// with a gradient rule, its float inputs in float64, is checked against central finite differences
// (gradient_check.h) with respect to every fed float input; a case the rule refuses must be
// refused with the rule's message. These add the tables' attribute and opset variety to the
// gradient rules' own cases (DPRUN_GRADIENT_CASE).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "engine/autograd/gradient_registry.h"
#include "gradient_check.h"
#include "op_cases/op_cases.h"

namespace dprun {
namespace {

using testing::OpCase;

// Finite differences run the model twice per element: larger cases are left to the device tests.
constexpr int64_t kMostElements = 1024;

// The inputs a rule treats as constants, as PyTorch does: the losses' class weights.
bool treated_as_constant(const OpCase& c, size_t input) {
  const std::string& op = c.node.op_type;
  return (op == "SoftmaxCrossEntropyLoss" || op == "NegativeLogLikelihoodLoss") && input == 2;
}

// Whether `c` can be checked by finite differences: an ai.onnx op with a gradient rule at the
// case's opset, float inputs that are neither 16-bit, whole numbers (ties and kinks) nor
// `special` (NaN and infinities), and between 1 and kMostElements of them fed.
bool differentiable_case(const OpCase& c) {
  const std::string& op = c.node.op_type;
  if (!c.node.domain.empty() || !GradientRegistry::instance().find("", op, c.opset)) return false;
  // A cast below float64 rounds the step away; a softmax over a 0-d input (rank >= 1 in ONNX)
  // is a case of the kernels' agreement only.
  if (op == "Cast" && c.node.attr_int("to") != static_cast<int64_t>(DType::Float64)) return false;
  if ((op == "Softmax" || op == "LogSoftmax") && c.inputs[0].shape.empty()) return false;
  // Every label ignored: the mean loss is 0/0, NaN on both sides of the comparison.
  if (treated_as_constant(c, 2) && c.node.has_attr("ignore_index") &&
      c.inputs[1].lo == c.inputs[1].hi &&
      c.inputs[1].lo == static_cast<double>(c.node.attr_int("ignore_index")))
    return false;
  int64_t fed = 0;
  for (const testing::InputSpec& spec : c.inputs) {
    // NaN and infinities (Min's and Max's propagation cases) have no derivative: skipped by
    // the flag, whatever the dtype.
    if (spec.special) return false;
    if (spec.whole || spec.dtype == DType::Float16 || spec.dtype == DType::BFloat16) return false;
    if (is_floating(spec.dtype) && !spec.constant) fed += shape_numel(spec.shape);
  }
  return fed > 0 && fed <= kMostElements;
}

// The spec of the node's input `input` (specs follow the present inputs); null when absent.
const testing::InputSpec* spec_of(const OpCase& c, size_t input) {
  if (input >= c.node.inputs.size() || c.node.inputs[input].empty()) return nullptr;
  size_t k = 0;
  for (size_t i = 0; i < input; ++i) k += c.node.inputs[i].empty() ? 0 : 1;
  return k < c.inputs.size() ? &c.inputs[k] : nullptr;
}

// The exact message with which the gradient of the case's node is refused, or "" when it is
// taken. Each is a documented limit of a rule (ops/<family>/*_grad.cpp) or of the gradient builder,
// listed by op, opset and attributes: the pads of a mode other than constant, auto_pad SAME_*
// (whose pads depend on the input's size), ops before the opset their backward ops need, legacy
// broadcasting from an axis, the scatter reductions whose gradients depend on the other updates,
// and the recurrent ops' shorter sequences.
std::string expected_refusal(const OpCase& c) {
  const Node& n = c.node;
  const std::string op = n.op_type;
  // A rule's refusal names the node.
  auto rule = [&](const std::string& why) { return n.describe() + ": gradient: " + why; };
  // The builder's, when no path leads from the output to x: its zeros need ConstantOfShape.
  auto no_zeros_for = [](const std::string& x) {
    return "gradient: no path leads from y to x '" + x +
           "', and building zeros for its gradient needs ai.onnx opset >= 9";
  };
  if (op == "Pad" && n.has_attr("mode") && n.attr_string("mode") != "constant")
    return rule("mode '" + n.attr_string("mode") + "' is not supported (only 'constant')");
  if ((op == "Conv" || op == "ConvTranspose") && n.has_attr("auto_pad") &&
      n.attr_string("auto_pad").rfind("SAME", 0) == 0)
    return rule("auto_pad " + n.attr_string("auto_pad") +
                " is not supported (only NOTSET and VALID)");
  // Their emitted nodes broadcast numpy-style (PRelu's slope before opset 7 is per channel).
  if ((op == "Clip" || op == "PRelu" || op == "Softsign" || op == "ThresholdedRelu") && c.opset < 7)
    return rule("needs ai.onnx opset >= 7 (numpy broadcasting)");
  // Before opset 7 B broadcast onto A from `axis` (grad::check_legacy_broadcast): unbroadcasting
  // matches only the suffix-aligned form.
  const bool arithmetic = op == "Add" || op == "Sub" || op == "Mul" || op == "Div" || op == "Pow";
  if (arithmetic && c.opset < 7 && n.attr_int("broadcast", 0) != 0 && n.has_attr("axis"))
    return rule("legacy broadcasting with an explicit axis is not supported");
  // Floor and Ceil pass no gradient back: the builder makes x's zeros.
  if ((op == "Floor" || op == "Ceil") && c.opset < 9) return no_zeros_for(n.inputs[0]);
  if (op == "TopK" && c.opset < 9)
    return rule("needs ai.onnx opset >= 9 (ConstantOfShape, Scatter)");
  if (op == "MaxPool" && c.opset < 9)
    return rule("needs ai.onnx opset >= 9 (Scatter), the graph imports " + std::to_string(c.opset));
  if (op == "Gather" && c.opset < 11)
    return rule("needs ai.onnx opset >= 11 (ScatterElements, Unique)");
  if (op == "Split" && c.opset < 9) return rule("building zeros needs ai.onnx opset >= 9");
  if (op == "Reshape" && c.opset < 5)
    return rule("reshaping needs ai.onnx opset >= 5 (Reshape's shape input)");
  // Training mode's running mean and variance reach no output: their gradients are zeros.
  if (op == "BatchNormalization" && c.opset < 9 && c.node.outputs.size() > 1)
    return no_zeros_for(n.inputs[3]);
  if ((op == "ScatterElements" || op == "ScatterND") && n.has_attr("reduction") &&
      n.attr_string("reduction") != "none" && n.attr_string("reduction") != "add")
    return rule("reduction '" + n.attr_string("reduction") +
                "' is not supported (only none and add)");
  // Einsum's rule refuses a diagonal or trace: the first input term that repeats a letter.
  if (op == "Einsum") {
    std::string equation;
    for (char ch : n.attr_string("equation"))
      if (ch != ' ') equation += ch;
    std::string terms = equation.substr(0, equation.find("->")) + ",";
    for (size_t start = 0, comma; (comma = terms.find(',', start)) != std::string::npos;
         start = comma + 1) {
      const std::string term = terms.substr(start, comma - start);
      const std::string letters = term.rfind("...", 0) == 0 ? term.substr(3) : term;
      for (char ch : letters)
        if (std::count(letters.begin(), letters.end(), ch) > 1)
          return rule(std::string("the letter '") + ch + "' repeats within '" + term +
                      "' (diagonals are not supported)");
    }
  }
  // The recurrent rules take only full sequences: the first shorter length is named.
  if (op == "RNN" || op == "GRU" || op == "LSTM")
    if (const testing::InputSpec* lens = spec_of(c, 4)) {
      const int64_t seq = c.inputs[0].shape[n.attr_int("layout", 0) == 0 ? 0 : 1];
      for (int64_t len : lens->values)
        if (len != seq)
          return rule("sequence_lens holds " + std::to_string(len) +
                      "; the gradient supports only sequences of the full length " +
                      std::to_string(seq));
    }
  return "";
}

Tensor to_float64(const Tensor& t) {
  std::vector<double> v;
  for (int64_t i = 0; i < t.numel(); ++i) v.push_back(t.item_as_double(i));
  return Tensor::from_vector<double>(t.shape(), v);
}

std::vector<OpCase> differentiable_cases() {
  std::vector<OpCase> cases;
  for (const OpCase& c : testing::all_op_cases())
    if (differentiable_case(c)) cases.push_back(c);
  return cases;
}

// The output differentiated: the node's first present one (an RNN's Y_h when Y is left out).
std::string checked_output(const OpCase& c) {
  for (const std::string& out : c.node.outputs)
    if (!out.empty()) return out;
  ADD_FAILURE() << c.name << " has no output";
  return "";
}

class OpCaseGradients : public ::testing::TestWithParam<OpCase> {};

TEST_P(OpCaseGradients, MatchFiniteDifferences) {
  const OpCase& c = GetParam();
  const std::vector<Tensor> values = testing::make_inputs(c, 1234);
  std::vector<testing::Input> inputs;
  std::vector<std::string> xs;
  for (size_t i = 0, k = 0; i < c.node.inputs.size() && k < values.size(); ++i) {
    if (c.node.inputs[i].empty()) continue;
    const testing::InputSpec& spec = c.inputs[k];
    const bool floating = is_floating(spec.dtype);
    inputs.push_back({c.node.inputs[i], floating ? to_float64(values[k]) : values[k],
                      spec.constant || !floating});
    if (floating && !spec.constant && !treated_as_constant(c, i)) xs.push_back(c.node.inputs[i]);
    ++k;
  }
  ASSERT_FALSE(xs.empty());
  if (const std::string refusal = expected_refusal(c); !refusal.empty()) {
    try {
      testing::check_gradients({c.node}, inputs, checked_output(c), xs, c.opset);
      ADD_FAILURE() << "the gradient rule took the node; expected it to say: " << refusal;
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()), refusal);
    }
    return;
  }
  testing::check_gradients({c.node}, inputs, checked_output(c), xs, c.opset);
}

INSTANTIATE_TEST_SUITE_P(Grad, OpCaseGradients, ::testing::ValuesIn(differentiable_cases()),
                         [](const ::testing::TestParamInfo<OpCase>& info) {
                           return info.param.name;
                         });

}  // namespace
}  // namespace dprun
