// The CUDA binary elementwise kernels: arithmetic (Add, Sub, Mul, Div, Pow; ops/elementwise/
// binary_arith.cu), comparisons (Equal, Less, LessOrEqual, Greater, GreaterOrEqual) and logic
// (And, Or, Xor; compare_logic.cu), each compared with the CPU kernel on the same random inputs.
// Float32 over every kind of broadcast (equal shapes, a scalar on either side, a row, a column,
// both sides broadcast, ranks that differ, more than 1024 values, an empty side); every dtype the
// op's CUDA definition lists, read from the registry; Pow's exponent of each numeric dtype; and
// before opset 7 the legacy broadcast attribute, with and without an axis. Divisors and Pow's
// bases are positive (negative bases only with whole exponents), comparisons see ties. Integer
// Div has no CUDA kernel (a zero divisor must fail, which a GPU cannot report without a sync).
// PRelu has cases of its own, per dtype and over its slope's broadcasts, and so has the fused
// gradient node ReluGrad (engine/rewrites/op_fusion.h): broadcasting and float64.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "engine/rewrites/rewrite_domain.h"
#include "op_cases/op_cases.h"
#include "ops/cuda/defs/cuda_types.h"

namespace dprun {
namespace {

using testing::dims_name;
using testing::floats;
using testing::InputSpec;
using testing::node_with;
using testing::OpCase;

const std::vector<std::string> kArithmetic = {"Add", "Sub", "Mul", "Div", "Pow"};
const std::vector<std::string> kComparisons = {"Equal", "Less", "LessOrEqual", "Greater",
                                               "GreaterOrEqual"};
const std::vector<std::string> kLogic = {"And", "Or", "Xor"};

/// The ops run over every broadcast and dtype (add_binary_cases).
const std::set<std::string> kBroadcastOps = [] {
  std::set<std::string> ops;
  for (const auto* list : {&kArithmetic, &kComparisons, &kLogic})
    ops.insert(list->begin(), list->end());
  return ops;
}();

/// The ops this file covers: those, PRelu (add_prelu_cases) and ReluGrad (add_relu_grad_cases).
const std::set<std::string> kCoveredOps = [] {
  std::set<std::string> ops = kBroadcastOps;
  ops.insert({"PRelu", "ReluGrad"});
  return ops;
}();

bool is_comparison(const std::string& op) {
  return std::count(kComparisons.begin(), kComparisons.end(), op) > 0;
}

/// Random input `index` (0: A, 1: B) of `op` in `dtype`: where the op is defined, with ties for
/// the comparisons; unsigned integers from 0.
InputSpec operand(const std::string& op, size_t index, Shape shape, DType dtype) {
  InputSpec spec{.shape = std::move(shape), .dtype = dtype, .lo = -5, .hi = 5};
  if (op == "Div" && index == 1) spec.lo = 0.5;      // no divisor near 0
  if (op == "Pow") spec.lo = index == 0 ? 0.5 : -2;  // a positive base
  if (op == "Pow") spec.hi = 2;
  if (is_comparison(op)) {  // whole numbers in [-2, 2]: equal values in both inputs
    spec.lo = -2, spec.hi = 2;
    spec.whole = is_floating(dtype);
  }
  if (is_integral(dtype) && !is_signed(dtype)) spec.lo = std::max(spec.lo, 0.0);
  return spec;
}

/// The pairs of input shapes each op runs on in float32.
struct ShapePair {
  std::string what;
  Shape a, b;
};
const std::vector<ShapePair> kShapePairs = {
    {"same", {2, 3, 4}, {2, 3, 4}},
    {"scalar_b", {2, 3, 4}, {}},
    {"scalar_a", {}, {2, 3, 4}},
    {"both_scalar", {}, {}},
    {"one_b", {2, 3, 4}, {1}},
    {"row", {3, 4}, {1, 4}},
    {"column", {3, 4}, {3, 1}},
    {"both_sides", {3, 1}, {1, 4}},
    {"both_sides_rank3", {2, 1, 4}, {3, 1}},
    {"lower_rank_b", {2, 3, 4}, {3, 4}},
    {"lower_rank_a", {4}, {2, 3, 4}},
    {"middle", {2, 3, 4}, {2, 1, 4}},
    {"wide_row", {5, 257}, {257}},  // more than 1024 values: vector loops and their tails
    {"wide_same", {5, 257}, {5, 257}},
    {"empty", {0, 3}, {3}},
};

OpCase binary_case(const std::string& op, const std::string& what, InputSpec a, InputSpec b,
                   int64_t opset, std::map<std::string, Attribute> attributes = {}) {
  return {.name = op + "_" + what,
          .node = node_with(op, {"a", "b"}, std::move(attributes)),
          .inputs = {std::move(a), std::move(b)},
          .opset = opset};
}

int64_t first_opset(const std::string& op) {
  for (const KernelDef& def : KernelRegistry::instance().definitions())
    if (def.device == DeviceType::CUDA && def.domain.empty() && def.op_type == op) return def.since;
  ADD_FAILURE() << op << " has no CUDA definition";
  return 1;
}

bool is_logic(const std::string& op) {
  return std::count(kLogic.begin(), kLogic.end(), op) > 0;
}

/// Float32 (the logic ops: bool) over every broadcast, and each other dtype the CUDA definition
/// lists over a broadcast of both sides and a wide block.
void add_broadcast_and_dtype_cases(const std::string& op, std::vector<OpCase>& cases) {
  const int64_t opset = std::max<int64_t>(first_opset(op), 17);
  const DType plain = is_logic(op) ? DType::Bool : DType::Float32;
  const std::string plain_name(dtype_name(plain));
  for (const ShapePair& s : kShapePairs)
    cases.push_back(binary_case(op, plain_name + "_" + s.what, operand(op, 0, s.a, plain),
                                operand(op, 1, s.b, plain), opset));
  for (DType dtype : testing::cuda_definition_dtypes(op)) {
    if (dtype == plain) continue;
    const std::string type(dtype_name(dtype));
    cases.push_back(binary_case(op, type + "_both_sides_rank3", operand(op, 0, {2, 1, 4}, dtype),
                                operand(op, 1, {3, 1}, dtype), opset));
    cases.push_back(binary_case(op, type + "_wide_same", operand(op, 0, {5, 257}, dtype),
                                operand(op, 1, {5, 257}, dtype), opset));
  }
}

/// Before opset 7: B broadcast onto A only with broadcast=1, from `axis` when given. Finite
/// differences check the float32 cases of the arithmetic's gradient rules here too (the rules
/// refuse an axis, grad::check_legacy_broadcast: op_cases_gradient_test.cpp expects it).
void add_legacy_broadcast_cases(const std::string& op, std::vector<OpCase>& cases) {
  const int64_t since = first_opset(op);
  if (since >= 7) return;
  const DType plain = is_logic(op) ? DType::Bool : DType::Float32;
  auto legacy = [&](const std::string& what, Shape a, Shape b, DType dtype,
                    std::map<std::string, Attribute> attributes, int64_t opset) {
    cases.push_back(binary_case(
        op, std::string(dtype_name(dtype)) + "_opset" + std::to_string(opset) + "_" + what,
        operand(op, 0, std::move(a), dtype), operand(op, 1, std::move(b), dtype), opset,
        std::move(attributes)));
  };
  const Attribute on = Attribute::of_int(1);
  legacy("same", {2, 3, 4}, {2, 3, 4}, plain, {}, 6);
  if (since != 6) legacy("same", {2, 3, 4}, {2, 3, 4}, plain, {}, since);
  legacy("suffix", {2, 3, 4}, {3, 4}, plain, {{"broadcast", on}}, 6);
  legacy("scalar", {2, 3, 4}, {}, plain, {{"broadcast", on}}, 6);
  const std::vector<DType> listed = testing::cuda_definition_dtypes(op);
  for (DType dtype : {plain, DType::Int32}) {
    if (std::find(listed.begin(), listed.end(), dtype) == listed.end()) continue;
    legacy("axis1", {2, 3, 4}, {3}, dtype, {{"broadcast", on}, {"axis", on}}, 6);
    legacy("axis0", {2, 3, 4}, {2, 3}, dtype, {{"broadcast", on}, {"axis", Attribute::of_int(0)}},
           6);
  }
}

/// Pow's exponent of every numeric dtype (opset 12+; the output has the base's dtype), and
/// negative bases under whole exponents.
void add_pow_exponent_cases(std::vector<OpCase>& cases) {
  for (DType exponent : cuda_ew::dtypes(cuda_ew::NumericAndHalfTypes{})) {
    if (exponent == DType::Float32) continue;
    InputSpec e = operand("Pow", 1, {3, 4}, exponent);
    if (!is_floating(exponent)) e.lo = is_signed(exponent) ? -3 : 0, e.hi = 3;
    cases.push_back(binary_case("Pow", "float32_exponent_" + std::string(dtype_name(exponent)),
                                operand("Pow", 0, {2, 3, 4}, DType::Float32), e, 17));
  }
  InputSpec base{.shape = {2, 3, 4}, .lo = -2, .hi = 2};
  InputSpec whole{.shape = {3, 4}, .lo = -3, .hi = 3, .whole = true};
  cases.push_back(binary_case("Pow", "negative_base_whole_exponent", base, whole, 17));
  whole.dtype = DType::Int64;
  cases.push_back(binary_case("Pow", "negative_base_int64_exponent", base, whole, 17));
}

void add_binary_cases(std::vector<OpCase>& cases) {
  for (const std::string& op : kBroadcastOps) {
    add_broadcast_and_dtype_cases(op, cases);
    add_legacy_broadcast_cases(op, cases);
  }
  add_pow_exponent_cases(cases);
}

std::string name_of(DType dt) {
  return std::string(dtype_name(dt));
}
/// Random data of `dtype` in [lo, hi].
InputSpec data(Shape shape, DType dtype = DType::Float32, double lo = -50, double hi = 50) {
  return {.shape = std::move(shape), .dtype = dtype, .lo = lo, .hi = hi};
}

void add_prelu_cases(std::vector<OpCase>& cases) {
  auto add = [&](const std::string& name, DType dt, Shape x, Shape slope, int64_t opset,
                 bool constant = false) {
    InputSpec s = data(std::move(slope), dt, -3, 3);
    s.constant = constant;
    cases.push_back({.name = "PRelu_" + name,
                     .node = node_with("PRelu", {"x", "slope"}),
                     .inputs = {data(std::move(x), dt), s},
                     .opset = opset});
  };
  for (DType dt :
       {DType::Float32, DType::Float64, DType::Int8, DType::Int16, DType::Int32, DType::Int64})
    add("channel_" + name_of(dt), dt, {2, 3, 4, 4}, {3, 1, 1}, 16);
  add("same_shape", DType::Float32, {2, 3, 4}, {2, 3, 4}, 16);
  add("one_element", DType::Float32, {2, 3, 4}, {1}, 9, true);
  add("trailing", DType::Float32, {257, 129}, {129}, 16);
  // Before opset 7 a 1-D slope of the channel count applies per channel.
  add("legacy_per_channel", DType::Float32, {2, 3, 4}, {3}, 6);
}

// The fused gradient node ReluGrad (the rewrite domain's).
void add_relu_grad_cases(std::vector<OpCase>& cases) {
  struct Shapes {
    Shape dy, x;
  };
  for (DType dtype : {DType::Float32, DType::Float64})
    for (const Shapes& s : std::vector<Shapes>{{{2, 3, 4, 5}, {2, 3, 4, 5}}, {{4}, {2, 4}}}) {
      InputSpec dy = floats(s.dy), x = floats(s.x);
      dy.dtype = x.dtype = dtype;
      x.whole = true;  // zeros among the values: Relu's subgradient there is 0
      Node node = node_with("ReluGrad", {"dy", "x"});
      node.domain = kRewriteDomain;
      node.outputs = {"dx"};
      cases.push_back({.name = "ReluGrad_" + std::string(dtype_name(dtype)) + "_" +
                               dims_name(s.dy) + "_" + dims_name(s.x),
                       .node = std::move(node),
                       .inputs = {dy, x},
                       .opset = 1});
    }
}

DPRUN_OP_CASES(ElementwiseBinary, kCoveredOps, add_binary_cases, add_prelu_cases,
               add_relu_grad_cases);

}  // namespace
}  // namespace dprun
