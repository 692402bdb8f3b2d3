// The CUDA unary elementwise kernels (ops/elementwise/unary_math.cu and activations.cu): the unary
// math (Abs ... BitwiseNot) and the activations (Relu ... Gelu, and the op fusion's dprun Gelu),
// each compared with the CPU kernel on the same random inputs. Every dtype the op's CUDA
// definition lists, read from the registry (a dtype added there gets its cases here); float32
// over a small block, a 0-d input, a block of more than 1024 values (vector loops and their
// tails) and an empty one; each attribute variant; the op's first opset; NaN and infinities
// for IsNaN and IsInf. Inputs lie where the op is defined and smooth (Log and Sqrt positive, Acosh
// above 1, Atanh inside (-1, 1)), so the gradient rules' finite differences hold on the same cases.
// Clip has cases of its own: its attribute and input bounds (fed, constant, one side only,
// crossed) per dtype; and so have Cast (ops/elementwise/cast.cu), between every pair of the
// dtypes its CUDA definition lists, from floats of a wide range and from whole numbers, and
// CastLike, every dtype to float32 and float32 to every dtype. The Cast targets the device does not
// convert are shown to be declined (they run on the host) in tests/unit/cuda_declines_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "engine/rewrites/rewrite_domain.h"
#include "op_cases/op_cases.h"

namespace dprun {
namespace {

using testing::dims_name;
using testing::floats;
using testing::InputSpec;
using testing::node_with;
using testing::OpCase;
using testing::scalar;
using Attributes = std::map<std::string, Attribute>;

/// How one op is tested.
struct UnaryOp {
  std::string op;
  double lo, hi;                          // where its inputs lie
  std::vector<Attributes> variants = {};  // attribute sets beyond the defaults, a case each
  std::string domain = "";
};

Attributes floats_attr(std::initializer_list<std::pair<const std::string, float>> list) {
  Attributes a;
  for (const auto& [name, value] : list) a[name] = Attribute::of_float(value);
  return a;
}

const std::vector<UnaryOp>& unary_ops() {
  static const std::vector<UnaryOp> ops = {
      // ops/elementwise/unary_math.cu
      {"Abs", -10, 10},
      {"Neg", -10, 10},
      {"Sign", -3, 3},
      {"Reciprocal", 0.2, 5},
      {"Sqrt", 0.01, 10},
      {"Exp", -4, 4},  // sums of larger values lose the finite differences' digits
      {"Log", 0.01, 10},
      {"Erf", -4, 4},
      {"Floor", -5, 5},
      {"Ceil", -5, 5},
      {"Round", -5, 5},
      {"Sin", -6, 6},
      {"Cos", -6, 6},
      {"Tan", -1.4, 1.4},
      {"Asin", -0.9, 0.9},  // the derivatives grow without bound at +-1
      {"Acos", -0.9, 0.9},
      {"Atan", -10, 10},
      {"Sinh", -5, 5},
      {"Cosh", -5, 5},
      {"Asinh", -10, 10},
      {"Acosh", 1.1, 10},
      {"Atanh", -0.9, 0.9},
      {"IsNaN", -3, 3},
      {"IsInf",
       -3,
       3,
       {{{"detect_positive", Attribute::of_int(0)}}, {{"detect_negative", Attribute::of_int(0)}}}},
      {"Not", 0, 1},
      {"BitwiseNot", -100, 100},
      // ops/elementwise/activations.cu
      {"Relu", -3, 3},
      {"LeakyRelu", -3, 3, {floats_attr({{"alpha", 0.3f}})}},
      {"Elu", -3, 3, {floats_attr({{"alpha", 0.5f}})}},
      {"Selu", -3, 3, {floats_attr({{"alpha", 2.0f}, {"gamma", 1.5f}})}},
      {"Celu", -3, 3, {floats_attr({{"alpha", 2.0f}})}},
      {"Sigmoid", -10, 10},
      {"Tanh", -5, 5},
      {"HardSigmoid", -5, 5, {floats_attr({{"alpha", 0.3f}, {"beta", 0.4f}})}},
      {"HardSwish", -5, 5},
      {"Softplus", -10, 10},
      {"Softsign", -5, 5},
      {"ThresholdedRelu", -3, 3, {floats_attr({{"alpha", 0.5f}})}},
      {"Mish", -5, 5},
      {"Shrink", -5, 5, {floats_attr({{"lambd", 1.5f}, {"bias", 0.5f}})}},
      {"Gelu",
       -5,
       5,
       {{{"approximate", Attribute::of_string("none")}},
        {{"approximate", Attribute::of_string("tanh")}}}},
      {"Gelu", -5, 5, {}, kRewriteDomain},  // the op fusion's, always the erf form
  };
  return ops;
}

/// The ops this file covers: the list above, Clip (add_clip_cases), and Cast and CastLike
/// (add_cast_cases).
const std::set<std::string> kCoveredOps = [] {
  std::set<std::string> covered = {"Clip", "Cast", "CastLike"};
  for (const UnaryOp& u : unary_ops()) covered.insert(u.op);
  return covered;
}();

/// The CUDA definition's first opset; the rewrite domain's ops are at its opset 1.
int64_t first_opset(const UnaryOp& u) {
  for (const KernelDef& def : KernelRegistry::instance().definitions())
    if (def.device == DeviceType::CUDA && def.domain == u.domain && def.op_type == u.op)
      return def.since;
  ADD_FAILURE() << u.op << " has no CUDA definition";
  return 1;
}

/// Random inputs of `dtype` in the op's range; unsigned integers from 0.
InputSpec input(const UnaryOp& u, Shape shape, DType dtype) {
  InputSpec spec{.shape = std::move(shape), .dtype = dtype, .lo = u.lo, .hi = u.hi};
  if (is_integral(dtype) && !is_signed(dtype)) spec.lo = std::max(spec.lo, 0.0);
  if (u.op == "Sign") spec.whole = true;  // zeros among the values
  return spec;
}

std::string case_name(const UnaryOp& u, const std::string& what) {
  return (u.domain.empty() ? "" : "dprun") + u.op + "_" + what;
}

OpCase unary_case(const UnaryOp& u, const std::string& what, InputSpec x, int64_t opset,
                  const Attributes& attributes = {}) {
  Node node = node_with(u.op, {"x"}, attributes);
  node.domain = u.domain;
  return {.name = case_name(u, what), .node = node, .inputs = {std::move(x)}, .opset = opset};
}

void add_unary_cases(std::vector<OpCase>& cases) {
  for (const UnaryOp& u : unary_ops()) {
    const int64_t since = first_opset(u);
    // A recent opset; the rewrite domain has only its opset 1.
    const int64_t opset = u.domain.empty() ? std::max<int64_t>(since, 17) : since;
    for (DType dtype : testing::cuda_definition_dtypes(u.op, u.domain)) {
      const std::string type(dtype_name(dtype));
      // A block of 24, and one of 1041 values: vector loops and their tails (too many for the
      // finite differences, which the small one gets).
      for (const Shape& shape : std::vector<Shape>{{2, 3, 4}, {3, 347}})
        cases.push_back(
            unary_case(u, type + "_" + dims_name(shape), input(u, shape, dtype), opset));
      if (dtype != DType::Float32 && dtype != DType::Bool) continue;
      for (const Shape& shape : std::vector<Shape>{{}, {0, 5}})
        cases.push_back(
            unary_case(u, type + "_" + dims_name(shape), input(u, shape, dtype), opset));
      for (size_t v = 0; v < u.variants.size(); ++v)
        cases.push_back(unary_case(u, type + "_attributes" + std::to_string(v),
                                   input(u, {2, 3, 4}, dtype), opset, u.variants[v]));
    }
    // The first opset (before 6 the unary ops had consumed_inputs), in float32 where the
    // definition lists it: finite differences check the gradient rules there too, before
    // opset 7 without numpy broadcasting (op_cases_gradient_test.cpp expects the refusals).
    const std::vector<DType> dtypes = testing::cuda_definition_dtypes(u.op, u.domain);
    const bool has_float32 = std::count(dtypes.begin(), dtypes.end(), DType::Float32) > 0;
    if (since != opset && !dtypes.empty()) {
      const DType dtype = has_float32 ? DType::Float32 : dtypes.front();
      cases.push_back(unary_case(u,
                                 std::string(dtype_name(dtype)) + "_opset" + std::to_string(since),
                                 input(u, {2, 3, 4}, dtype), since));
    }
    // NaN and infinities among the values, for the ops that classify them (as the GPU-only
    // tests/cuda/cuda_elementwise_test.cpp does: what other ops make of a NaN is not pinned
    // between the devices).
    if (u.op != "IsNaN" && u.op != "IsInf") continue;
    std::vector<Attributes> sets = {{}};
    sets.insert(sets.end(), u.variants.begin(), u.variants.end());
    for (size_t v = 0; v < sets.size(); ++v) {
      InputSpec x = input(u, {4, 6}, DType::Float32);
      x.special = true;
      const std::string what = v == 0 ? "" : "_attributes" + std::to_string(v - 1);
      cases.push_back(unary_case(u, "float32_nan_inf" + what, x, opset, sets[v]));
    }
  }
}

std::string name_of(DType dt) {
  return std::string(dtype_name(dt));
}
/// Random data of `dtype` in [lo, hi].
InputSpec data(Shape shape, DType dtype = DType::Float32, double lo = -50, double hi = 50) {
  return {.shape = std::move(shape), .dtype = dtype, .lo = lo, .hi = hi};
}

void add_clip_cases(std::vector<OpCase>& cases) {
  auto attrs = [](std::optional<float> lo, std::optional<float> hi) {
    std::map<std::string, Attribute> a;
    if (lo) a["min"] = Attribute::of_float(*lo);
    if (hi) a["max"] = Attribute::of_float(*hi);
    return a;
  };
  // Opsets 1-10: float attributes (absent ones are unbounded).
  cases.push_back({.name = "Clip_attrs_opset6",
                   .node = node_with("Clip", {"x"}, attrs(-1.0f, 1.5f)),
                   .inputs = {floats({3, 257})},
                   .opset = 6});
  cases.push_back({.name = "Clip_attr_min_only_opset1",
                   .node = node_with("Clip", {"x"}, attrs(0.0f, std::nullopt)),
                   .inputs = {data({4, 5}, DType::Float64)},
                   .opset = 1});
  cases.push_back({.name = "Clip_attr_max_only_opset6",
                   .node = node_with("Clip", {"x"}, attrs(std::nullopt, 6.0f)),
                   .inputs = {data({4, 5})},
                   .opset = 6});
  // Opset 11+: bounds as inputs, fed or constant, of the input's dtype.
  for (DType dt : {DType::Float32, DType::Float64, DType::Int8, DType::Int16, DType::Int32,
                   DType::Int64, DType::UInt8, DType::UInt16, DType::UInt32, DType::UInt64}) {
    const bool is_unsigned =
        dt == DType::UInt8 || dt == DType::UInt16 || dt == DType::UInt32 || dt == DType::UInt64;
    const double lo = is_unsigned ? 10 : -20, hi = 30;
    const double x_lo = is_unsigned ? 0 : -50;
    cases.push_back({.name = "Clip_inputs_" + name_of(dt),
                     .node = node_with("Clip", {"x", "lo", "hi"}),
                     .inputs = {data({3, 5, 7}, dt, x_lo, 50), scalar(dt, lo), scalar(dt, hi)},
                     .opset = 13});
    cases.push_back(
        {.name = "Clip_constant_bounds_" + name_of(dt),
         .node = node_with("Clip", {"x", "lo", "hi"}),
         .inputs = {data({3, 5, 7}, dt, x_lo, 50), scalar(dt, lo, true), scalar(dt, hi, true)},
         .opset = 13});
  }
  cases.push_back({.name = "Clip_min_only_opset11",
                   .node = node_with("Clip", {"x", "lo"}),
                   .inputs = {data({6, 7}), scalar(DType::Float32, 0.0, true)},
                   .opset = 11});
  cases.push_back({.name = "Clip_max_only",
                   .node = node_with("Clip", {"x", "", "hi"}),
                   .inputs = {data({6, 7}, DType::Int32), scalar(DType::Int32, 6)},
                   .opset = 13});
  cases.push_back({.name = "Clip_no_bounds",
                   .node = node_with("Clip", {"x"}),
                   .inputs = {data({6, 7})},
                   .opset = 13});
  cases.push_back({.name = "Clip_min_above_max",
                   .node = node_with("Clip", {"x", "lo", "hi"}),
                   .inputs = {data({6, 7}), scalar(DType::Float32, 5), scalar(DType::Float32, -5)},
                   .opset = 13});
  // ReLU6 as torchvision exports it: 0-d Constant bounds, a 4-D input.
  cases.push_back({.name = "Clip_relu6_4d",
                   .node = node_with("Clip", {"x", "lo", "hi"}),
                   .inputs = {data({2, 8, 9, 9}, DType::Float32, -10, 10),
                              scalar(DType::Float32, 0, true), scalar(DType::Float32, 6, true)},
                   .opset = 13});
}

/// Random values of `dtype` for a cast: wide enough to saturate, wrap and overflow float16.
InputSpec cast_input(DType dtype, bool whole) {
  InputSpec spec = floats({3, 7, 11});
  spec.dtype = dtype;
  if (whole) {  // small whole numbers: zeros for casts to bool, exact integers
    spec.whole = true;
    spec.lo = -2, spec.hi = 2;
  } else if (is_floating(dtype)) {
    spec.lo = -300, spec.hi = 300;
  } else if (dtype != DType::Bool) {
    spec.lo = -100000, spec.hi = 100000;
  }
  return spec;
}

void add_cast_cases(std::vector<OpCase>& cases) {
  // The dtypes the CUDA Cast definition accepts, from the registry: a dtype added there gets its
  // cases here (and fails them if the harness cannot make its values).
  const std::vector<DType> dtypes = testing::cuda_definition_dtypes("Cast");
  for (DType from : dtypes)
    for (DType to : dtypes)
      for (int whole = 0; whole < 2; ++whole) {
        if (whole && !is_floating(from)) continue;
        const std::string pair = std::string(dtype_name(from)) + "_to_" +
                                 std::string(dtype_name(to)) + (whole ? "_whole" : "");
        cases.push_back(
            {.name = "Cast_" + pair,
             .node = node_with("Cast", {"x"}, {{"to", Attribute::of_int(static_cast<int>(to))}}),
             .inputs = {cast_input(from, whole != 0)},
             .opset = 13});
      }
  // CastLike: every dtype to float32 and float32 to every dtype.
  for (DType other : dtypes) {
    std::vector<std::pair<DType, DType>> pairs = {{other, DType::Float32}};
    if (other != DType::Float32) pairs.emplace_back(DType::Float32, other);
    for (const auto& [from, to] : pairs) {
      InputSpec like = cast_input(to, false);
      like.shape = {2};
      cases.push_back({.name = "CastLike_" + std::string(dtype_name(from)) + "_to_" +
                               std::string(dtype_name(to)),
                       .node = node_with("CastLike", {"x", "like"}),
                       .inputs = {cast_input(from, false), like},
                       .opset = 15});
    }
  }
}

DPRUN_OP_CASES(ElementwiseUnary, kCoveredOps, add_unary_cases, add_clip_cases, add_cast_cases);

}  // namespace
}  // namespace dprun
