// The CUDA kernels of MatMul and Gemm (ops/linalg/), each compared with the CPU kernel on the
// same random inputs: one-node models run on cuda:0 and on cpu:0. MatMul over 1-D operands and
// batches that broadcast; Gemm with each transpose, every shape of C that broadcasts, the
// defaults, beta = 0 and a linear layer as exporters write it. The case table also checks,
// without a GPU, that every CUDA definition of these ops is exercised by some case and that
// every case finds a CUDA kernel. (Softmax and LogSoftmax have their table in ops/softmax/,
// Transpose and the reshape family theirs in ops/array/data_movement_cases.cpp.)
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "op_cases/op_cases.h"

namespace dprun {
namespace {

/// The ops whose CUDA kernels this file covers.
const std::set<std::string> kCoveredOps = {"MatMul", "Gemm"};

using testing::dims_name;
using testing::floats;
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

DPRUN_OP_CASES(LinearAlgebra, kCoveredOps, add_matmul_cases, add_gemm_cases);

}  // namespace
}  // namespace dprun
