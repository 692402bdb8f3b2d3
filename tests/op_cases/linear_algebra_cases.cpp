// The CUDA kernels of MatMul, Gemm, Softmax, LogSoftmax, Transpose and the reshape family,
// each compared with the CPU kernel on the same random inputs: one-node models run on cuda:0
// and on cpu:0. The case table also checks, without a GPU, that every CUDA definition of
// these ops is exercised by some case and that every case finds a CUDA kernel.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "op_cases/op_cases.h"

namespace dprun {
namespace {

/// The ops whose CUDA kernels this file covers.
const std::set<std::string> kCoveredOps = {"MatMul",    "Gemm",    "Softmax", "LogSoftmax",
                                           "Transpose", "Reshape", "Flatten", "Squeeze",
                                           "Unsqueeze", "Identity"};

using testing::dims_name;
using testing::floats;
using testing::int64s;
using testing::node_with;
using testing::OpCase;

void add_matmul_cases(std::vector<OpCase>& cases) {
  const std::vector<std::pair<Shape, Shape>> shapes = {
      {{2, 3}, {3, 4}},           // plain
      {{5, 2, 3}, {3, 4}},        // b without batch dims: one GEMM over a's batches
      {{4}, {4, 3}},              // 1-D a
      {{3, 4}, {4}},              // 1-D b
      {{3, 4}, {2, 4, 5}},        // a without batch dims: stride 0
      {{2, 3, 4}, {2, 4, 5}},     // equal batches: strided batched
      {{2, 1, 3, 4}, {5, 4, 2}},  // batches broadcast against each other: a GEMM per matrix
      {{2, 8, 16}, {16, 12}},
  };
  for (const auto& [a, b] : shapes)
    cases.push_back({.name = "MatMul_" + dims_name(a) + "_by_" + dims_name(b),
                     .node = node_with("MatMul", {"a", "b"}),
                     .inputs = {floats(a), floats(b)}});
}

void add_gemm_cases(std::vector<OpCase>& cases) {
  const int64_t m = 3, k = 5, n = 4;
  const std::vector<Shape> c_shapes = {{}, {n}, {m, 1}, {m, n}, {1, n}, {1}};
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb) {
      const Shape a = ta ? Shape{k, m} : Shape{m, k}, b = tb ? Shape{n, k} : Shape{k, n};
      const std::map<std::string, Attribute> attrs = {{"transA", Attribute::of_int(ta)},
                                                      {"transB", Attribute::of_int(tb)},
                                                      {"alpha", Attribute::of_float(0.75f)},
                                                      {"beta", Attribute::of_float(1.5f)}};
      const std::string prefix =
          "Gemm_transA" + std::to_string(ta) + "_transB" + std::to_string(tb);
      cases.push_back({.name = prefix + "_no_C",
                       .node = node_with("Gemm", {"a", "b"}, attrs),
                       .inputs = {floats(a), floats(b)}});
      for (const Shape& c : c_shapes)
        cases.push_back({.name = prefix + "_C_" + dims_name(c),
                         .node = node_with("Gemm", {"a", "b", "c"}, attrs),
                         .inputs = {floats(a), floats(b), floats(c)}});
    }
  // Defaults (alpha = beta = 1), and beta = 0, where C is not read.
  cases.push_back({.name = "Gemm_defaults",
                   .node = node_with("Gemm", {"a", "b", "c"}),
                   .inputs = {floats({m, k}), floats({k, n}), floats({n})}});
  // A linear layer as exporters write it: B transposed, C one row added whole (cuBLASLt's bias
  // epilogue), with sizes that leave operands aligned to 4 bytes only.
  for (const Shape& c : {Shape{7}, Shape{1, 7}})
    cases.push_back({.name = "Gemm_linear_layer_C_" + dims_name(c),
                     .node = node_with("Gemm", {"a", "b", "c"}, {{"transB", Attribute::of_int(1)}}),
                     .inputs = {floats({9, 13}), floats({7, 13}), floats(c)}});
  cases.push_back({.name = "Gemm_beta0",
                   .node = node_with("Gemm", {"a", "b", "c"}, {{"beta", Attribute::of_float(0)}}),
                   .inputs = {floats({m, k}), floats({k, n}), floats({m, n})}});
}

void add_softmax_cases(std::vector<OpCase>& cases) {
  for (const std::string op : {"Softmax", "LogSoftmax"}) {
    auto add = [&](const std::string& name, Shape shape, int64_t opset,
                   std::optional<int64_t> axis) {
      std::map<std::string, Attribute> attrs;
      if (axis) attrs["axis"] = Attribute::of_int(*axis);
      cases.push_back({.name = op + "_" + name,
                       .node = node_with(op, {"x"}, attrs),
                       .inputs = {floats(std::move(shape))},
                       .opset = opset,
                       // Softmax values are positive and do not cancel; LogSoftmax's x - shift
                       // can, so it keeps the floor of 1.
                       .floor = op == "Softmax" ? 0.0 : 1.0});
    };
    add("2x3x70_axis_last", {2, 3, 70}, 13, -1);
    add("2x3x70_default_axis", {2, 3, 70}, 13, std::nullopt);
    add("2x3x70_axis1", {2, 3, 70}, 13, 1);  // strided: inner = 70
    add("2x3x70_axis0", {2, 3, 70}, 13, 0);
    add("2x3x70_opset11_axis1", {2, 3, 70}, 11, 1);  // coerced to [2, 210]
    add("2x3x70_opset11_default_axis", {2, 3, 70}, 11, std::nullopt);
    add("4x5000_wide_row", {4, 5000}, 13, -1);  // longer than a block
    add("scalar", {}, 13, std::nullopt);
    // float16 and bfloat16, computed in float: rows and columns.
    for (DType dtype : {DType::Float16, DType::BFloat16}) {
      const std::string type(dtype_name(dtype));
      add("2x3x70_axis_last_" + type, {2, 3, 70}, 13, -1);
      cases.back().inputs[0].dtype = dtype;
      add("2x3x70_axis1_" + type, {2, 3, 70}, 13, 1);
      cases.back().inputs[0].dtype = dtype;
    }
  }
}

void add_transpose_cases(std::vector<OpCase>& cases) {
  const std::vector<std::pair<Shape, std::vector<int64_t>>> perms = {
      {{3, 5}, {1, 0}},
      {{3, 5}, {}},  // default: reversed
      {{2, 3, 4}, {0, 2, 1}},
      {{2, 3, 4}, {2, 0, 1}},
      {{2, 3, 4}, {0, 1, 2}},  // the identity: a copy
      {{2, 3, 4, 5}, {0, 2, 1, 3}},
      {{2, 3, 4, 5}, {3, 1, 0, 2}},
      {{2, 1, 4, 5}, {1, 3, 0, 2}},  // a size-1 dim
      {{2, 3, 4, 5}, {-1, -2, 0, 1}},
  };
  for (const auto& [shape, perm] : perms) {
    std::map<std::string, Attribute> attrs;
    if (!perm.empty()) attrs["perm"] = Attribute::of_ints(perm);
    std::string perm_name = perm.empty() ? "default" : "";
    for (int64_t p : perm) {
      if (p < 0) perm_name += 'm';
      perm_name += std::to_string(std::abs(p));
    }
    cases.push_back({.name = "Transpose_" + dims_name(shape) + "_perm_" + perm_name,
                     .node = node_with("Transpose", {"x"}, attrs),
                     .inputs = {floats(shape)}});
  }
  // Other element sizes move the same way.
  for (DType dt : {DType::UInt8, DType::Int16, DType::Int64, DType::Float64})
    cases.push_back(
        {.name = "Transpose_" + std::string(dtype_name(dt)),
         .node = node_with("Transpose", {"x"}, {{"perm", Attribute::of_ints({2, 0, 1})}}),
         .inputs = {{.shape = {3, 4, 5}, .dtype = dt}}});
}

void add_reshape_cases(std::vector<OpCase>& cases) {
  const Shape x = {2, 3, 4};
  cases.push_back({.name = "Reshape_input",
                   .node = node_with("Reshape", {"x", "shape"}),
                   .inputs = {floats(x), int64s({4, 0, -1})}});
  cases.push_back({.name = "Reshape_opset4_attribute",
                   .node = node_with("Reshape", {"x"}, {{"shape", Attribute::of_ints({6, 4})}}),
                   .inputs = {floats(x)},
                   .opset = 4});
  cases.push_back({.name = "Flatten",
                   .node = node_with("Flatten", {"x"}, {{"axis", Attribute::of_int(2)}}),
                   .inputs = {floats(x)}});
  cases.push_back({.name = "Squeeze_input",
                   .node = node_with("Squeeze", {"x", "axes"}),
                   .inputs = {floats({2, 1, 3, 1}), int64s({1, -1})}});
  cases.push_back({.name = "Squeeze_opset11_attribute",
                   .node = node_with("Squeeze", {"x"}, {{"axes", Attribute::of_ints({1})}}),
                   .inputs = {floats({2, 1, 3, 1})},
                   .opset = 11});
  cases.push_back({.name = "Unsqueeze_input",
                   .node = node_with("Unsqueeze", {"x", "axes"}),
                   .inputs = {floats(x), int64s({0, 4})}});
  cases.push_back({.name = "Unsqueeze_opset11_attribute",
                   .node = node_with("Unsqueeze", {"x"}, {{"axes", Attribute::of_ints({1})}}),
                   .inputs = {floats(x)},
                   .opset = 11});
  cases.push_back(
      {.name = "Identity", .node = node_with("Identity", {"x"}), .inputs = {floats(x)}});
}

DPRUN_OP_CASES(LinearAlgebra, kCoveredOps, add_matmul_cases, add_gemm_cases, add_softmax_cases,
               add_transpose_cases, add_reshape_cases);

}  // namespace
}  // namespace dprun
