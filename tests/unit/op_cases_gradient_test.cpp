// The op case tables (tests/op_cases/) reused for the gradient rules: each case of an op with a
// gradient rule, its float inputs in float64, is checked against central finite differences
// (gradient_check.h) with respect to every fed float input; a case the rule refuses must be
// refused with the rule's message. These add the tables' attribute and opset variety to the
// gradient rules' own cases (DPRUN_GRADIENT_CASE).
#include <gtest/gtest.h>

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
// case's opset, float inputs that are neither 16-bit nor whole numbers (ties and kinks), and
// between 1 and kMostElements of them fed.
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
    if (spec.whole || spec.dtype == DType::Float16 || spec.dtype == DType::BFloat16) return false;
    if (is_floating(spec.dtype) && !spec.constant) fed += shape_numel(spec.shape);
  }
  return fed > 0 && fed <= kMostElements;
}

// What the rule says when it refuses the case's node, or "" when it takes it. Each is a
// documented limit of its rule (ops/grad/): the pads of a mode other than constant, auto_pad
// SAME_* (whose pads depend on the input's size), and ops before the opset their backward ops
// need.
std::string expected_refusal(const OpCase& c) {
  const Node& n = c.node;
  const std::string op = n.op_type;
  if (op == "Pad" && n.has_attr("mode") && n.attr_string("mode") != "constant")
    return "gradient: mode '" + n.attr_string("mode") + "' is not supported (only 'constant')";
  if ((op == "Conv" || op == "ConvTranspose") && n.has_attr("auto_pad") &&
      n.attr_string("auto_pad").rfind("SAME", 0) == 0)
    return "gradient: auto_pad " + n.attr_string("auto_pad") +
           " is not supported (only NOTSET and VALID)";
  if ((op == "Clip" || op == "PRelu") && c.opset < 7)
    return "gradient: needs ai.onnx opset >= 7 (numpy broadcasting)";
  if (op == "MaxPool" && c.opset < 9) return "gradient: needs ai.onnx opset >= 9 (Scatter)";
  if (op == "Gather" && c.opset < 11)
    return "gradient: needs ai.onnx opset >= 11 (ScatterElements, Unique)";
  if (op == "Split" && c.opset < 9) return "gradient: building zeros needs ai.onnx opset >= 9";
  if (op == "Reshape" && c.opset < 5)
    return "gradient: reshaping needs ai.onnx opset >= 5 (Reshape's shape input)";
  // Training mode's running mean and variance reach no output: their gradients are zeros.
  if (op == "BatchNormalization" && c.opset < 9 && c.node.outputs.size() > 1)
    return "building zeros for its gradient needs ai.onnx opset >= 9";
  if (op == "ScatterElements" && n.has_attr("reduction") && n.attr_string("reduction") != "none" &&
      n.attr_string("reduction") != "add")
    return "gradient: reduction '" + n.attr_string("reduction") +
           "' is not supported (only none and add)";
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
      testing::check_gradients({c.node}, inputs, c.node.outputs[0], xs, c.opset);
      ADD_FAILURE() << "the gradient rule took the node; expected it to say: " << refusal;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(refusal), std::string::npos) << e.what();
    }
    return;
  }
  testing::check_gradients({c.node}, inputs, c.node.outputs[0], xs, c.opset);
}

INSTANTIATE_TEST_SUITE_P(Grad, OpCaseGradients, ::testing::ValuesIn(differentiable_cases()),
                         [](const ::testing::TestParamInfo<OpCase>& info) {
                           return info.param.name;
                         });

}  // namespace
}  // namespace dprun
