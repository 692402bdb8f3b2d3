// The CUDA variadic Sum, Mean, Min, Max (ops/elementwise/variadic.cu) and Where (where.cu), each
// compared with the CPU kernel on the same random inputs: one to four inputs broadcast together
// (equal shapes, scalars, rows, columns, ranks that differ, more than 1024 values); every dtype
// the op's CUDA definition lists (Where, which lists none, every fixed-size dtype); equal shapes
// before opset 8, when the variadic ops did not broadcast; and NaN and infinities for Min and
// Max, which propagate NaN.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "op_cases/op_cases.h"

namespace dprun {
namespace {

using testing::dims_name;
using testing::InputSpec;
using testing::node_with;
using testing::OpCase;

const std::vector<std::string> kVariadicOps = {"Sum", "Mean", "Min", "Max"};

const std::set<std::string> kCoveredOps = {"Sum", "Mean", "Min", "Max", "Where"};

/// The input shapes each op runs on in float32.
struct Shapes {
  std::string what;
  std::vector<Shape> inputs;
};
const std::vector<Shapes> kVariadicShapes = {
    {"one", {{2, 3, 4}}},
    {"one_scalar", {{}}},
    {"two_same", {{2, 3, 4}, {2, 3, 4}}},
    {"two_both_sides", {{3, 1}, {1, 4}}},
    {"three_same", {{2, 3, 4}, {2, 3, 4}, {2, 3, 4}}},
    {"three_broadcast", {{2, 3, 4}, {3, 1}, {1}}},
    {"three_scalar_first", {{}, {2, 1, 4}, {3, 1}}},
    {"three_lower_rank_first", {{4}, {2, 3, 4}, {3, 4}}},
    {"four_broadcast", {{2, 1, 4}, {3, 1}, {4}, {}}},
    {"wide", {{5, 257}, {257}, {5, 1}}},  // more than 1024 values
    {"empty", {{0, 3}, {3}}},
};

/// `shapes` as inputs x0, x1, ... of `dtype`; unsigned integers from 0.
OpCase variadic_case(const std::string& op, const std::string& what,
                     const std::vector<Shape>& shapes, DType dtype, int64_t opset) {
  OpCase c{.name = op + "_" + what, .node = node_with(op, {}), .opset = opset};
  for (size_t i = 0; i < shapes.size(); ++i) {
    c.node.inputs.emplace_back("x");  // appended: GCC 12 misreports "x" + ... (-Wrestrict)
    c.node.inputs.back() += std::to_string(i);
    InputSpec spec{.shape = shapes[i], .dtype = dtype, .lo = -5, .hi = 5};
    if (is_integral(dtype) && !is_signed(dtype)) spec.lo = 0;
    c.inputs.push_back(spec);
  }
  return c;
}

void add_variadic_cases(std::vector<OpCase>& cases) {
  for (const std::string& op : kVariadicOps) {
    for (const Shapes& s : kVariadicShapes)
      cases.push_back(variadic_case(op, "float32_" + s.what, s.inputs, DType::Float32, 17));
    for (DType dtype : testing::cuda_definition_dtypes(op)) {
      if (dtype == DType::Float32) continue;
      const std::string type(dtype_name(dtype));
      cases.push_back(
          variadic_case(op, type + "_three_broadcast", kVariadicShapes[5].inputs, dtype, 17));
      cases.push_back(variadic_case(op, type + "_wide", kVariadicShapes[9].inputs, dtype, 17));
    }
    // Before opset 8 the inputs have equal shapes (opset 1 also had consumed_inputs).
    for (int64_t opset : {1, 6})
      cases.push_back(variadic_case(op, "opset" + std::to_string(opset) + "_three_same",
                                    kVariadicShapes[4].inputs, DType::Float32, opset));
  }
  // NaN propagates through Min and Max. A NaN has no derivative: finite differences skip
  // cases with `special` inputs.
  for (const std::string op : {"Min", "Max"}) {
    OpCase c = variadic_case(op, "float32_nan_inf", {{4, 6}, {4, 6}, {6}}, DType::Float32, 17);
    for (InputSpec& spec : c.inputs) spec.special = true;
    cases.push_back(std::move(c));
  }
}

/// Where(condition, A, B): A and B of every fixed-size dtype (the definition lists none: values
/// move as raw elements of their size), the condition and both values broadcast.
void add_where_cases(std::vector<OpCase>& cases) {
  struct WhereShapes {
    std::string what;
    Shape condition, a, b;
  };
  const std::vector<WhereShapes> shapes = {
      {"same", {2, 3, 4}, {2, 3, 4}, {2, 3, 4}},
      {"scalar_values", {2, 3, 4}, {}, {}},
      {"scalar_condition", {}, {2, 3, 4}, {3, 4}},
      {"row_column", {3, 1}, {1, 4}, {3, 4}},
      {"lower_rank_condition", {4}, {2, 3, 4}, {2, 1, 4}},
      {"wide", {5, 257}, {257}, {5, 1}},  // more than 1024 values
      {"empty", {0, 3}, {3}, {1}},
  };
  auto where_case = [](const std::string& what, const WhereShapes& s, DType dtype, int64_t opset) {
    InputSpec a{.shape = s.a, .dtype = dtype, .lo = -5, .hi = 5};
    InputSpec b{.shape = s.b, .dtype = dtype, .lo = -5, .hi = 5};
    if (is_integral(dtype) && !is_signed(dtype)) a.lo = b.lo = 0;
    return OpCase{.name = "Where_" + what,
                  .node = node_with("Where", {"condition", "a", "b"}),
                  .inputs = {{.shape = s.condition, .dtype = DType::Bool}, a, b},
                  .opset = opset};
  };
  for (const WhereShapes& s : shapes)
    cases.push_back(where_case("float32_" + s.what, s, DType::Float32, 17));
  for (DType dtype :
       {DType::Float64, DType::Float16, DType::BFloat16, DType::Int8, DType::Int16, DType::Int32,
        DType::Int64, DType::UInt8, DType::UInt16, DType::UInt32, DType::UInt64, DType::Bool})
    cases.push_back(
        where_case(std::string(dtype_name(dtype)) + "_row_column", shapes[3], dtype, 17));
  // Opset 9, Where's first (16 added bfloat16 only).
  cases.push_back(where_case("opset9_same", shapes[0], DType::Float32, 9));
}

DPRUN_OP_CASES(ElementwiseVariadic, kCoveredOps, add_variadic_cases, add_where_cases);

}  // namespace
}  // namespace dprun
