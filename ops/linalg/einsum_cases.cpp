// Einsum, which has no CUDA kernel but a gradient rule: products, batched products, transposes,
// sums over a letter, outer products, three operands, broadcast ellipses, diagonals and a trace
// (a letter repeated within a term, which the rule refuses: op_cases_gradient_test.cpp expects
// it), in float32, float64 and int64, at Einsum's first opset (12). A GPU's plan runs it on the
// host: on sim:0 the cases check the copies around a host fallback, and finite differences
// check the rule.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "op_cases/op_cases.h"

namespace dprun {
namespace {

using testing::floats;
using testing::InputSpec;
using testing::OpCase;

const std::set<std::string> kHostOnlyOps = {"Einsum"};

struct Equation {
  std::string what, equation;
  std::vector<Shape> operands;
};

const std::vector<Equation> kEquations = {
    {"matmul", "ij,jk->ik", {{3, 4}, {4, 5}}},
    {"batch_matmul", "bij,bjk->bik", {{2, 3, 4}, {2, 4, 2}}},
    {"transpose", "ijk->kji", {{2, 3, 4}}},
    {"sum_axis", "ij->i", {{3, 5}}},
    {"sum_all", "ij->", {{3, 5}}},
    {"outer", "i,j->ij", {{3}, {4}}},
    {"implicit_output", "ij,jk", {{2, 3}, {3, 4}}},
    {"three_operands", "ij,jk,kl->il", {{2, 3}, {3, 4}, {4, 2}}},
    {"letter_of_one_operand", "ij,k->ik", {{2, 3}, {4}}},  // j summed out of the first alone
    {"ellipsis", "...ij,...jk->...ik", {{2, 3, 4}, {1, 4, 2}}},
    {"ellipsis_rank_mismatch", "...ij,jk->...ik", {{2, 2, 3}, {3, 2}}},
    {"diagonal", "ii->i", {{4, 4}}},
    {"trace", "ii", {{4, 4}}},
    {"batch_diagonal_product", "bii,bi->bi", {{2, 3, 3}, {2, 3}}},
    {"diagonal_of_three", "iji->ij", {{3, 2, 3}}},
};

void add_einsum_cases(std::vector<OpCase>& cases) {
  for (const Equation& e : kEquations)
    for (DType dtype : {DType::Float32, DType::Float64, DType::Int64}) {
      if (dtype != DType::Float32 && e.what != "batch_matmul" && e.what != "ellipsis") continue;
      OpCase c{.name = "Einsum_" + e.what + "_" + std::string(dtype_name(dtype)),
               .node = testing::node_with("Einsum", {},
                                          {{"equation", Attribute::of_string(e.equation)}}),
               .opset = 12};
      for (size_t i = 0; i < e.operands.size(); ++i) {
        c.node.inputs.emplace_back("x");  // appended: GCC 12 misreports "x" + ... (-Wrestrict)
        c.node.inputs.back() += std::to_string(i);
        InputSpec spec = floats(e.operands[i]);
        spec.dtype = dtype;
        if (dtype == DType::Int64) spec.lo = -5, spec.hi = 5;
        c.inputs.push_back(spec);
      }
      cases.push_back(std::move(c));
    }
}

DPRUN_OP_CASES_WITH_HOST_ONLY(Einsum, {}, kHostOnlyOps, add_einsum_cases);

}  // namespace
}  // namespace dprun
