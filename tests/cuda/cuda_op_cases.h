#pragma once
// A table-driven check of CUDA kernels against the CPU kernels, shared by the CUDA op tests
// that are not elementwise: each file lists the ops it covers and a table of one-node cases.
// Without a GPU the table is still checked against the registry (every CUDA definition of a
// covered op has a case, every case finds a CUDA kernel); with one, each case runs on cuda:0
// and on cpu:0 with the same random inputs and the outputs must agree.
#include <gtest/gtest.h>

#include <map>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "engine/graph.h"
#include "engine/kernel.h"
#include "engine/tensor.h"

namespace dprun::testing {

/// One graph input: random values of `dtype`, or the given int64 `values` (shapes, axes,
/// indices). Random floats lie in [lo, hi], rounded to whole numbers when `whole` (so values
/// repeat: ties for ArgMax, zeros for casts to bool); random integers are the integers in it.
/// A `constant` input is an initializer of the graph instead of a fed input: the plan (and so
/// the kernel's factory) sees its value.
struct InputSpec {
  Shape shape;
  DType dtype = DType::Float32;
  std::vector<int64_t> values;
  double lo = -2.0, hi = 2.0;
  bool constant = false;
  bool whole = false;
};

/// One node run on both devices.
struct CudaCase {
  std::string name;  // the test's name suffix: letters, digits and '_' only
  Node node;
  std::vector<InputSpec> inputs;
  int64_t opset = 17;
  /// Floats agree to 1e-5 relative: |cuda - cpu| <= 1e-5 * max(|cpu|, floor). A floor of 1
  /// keeps sums of products of O(1) values that cancel to near 0 from demanding more than
  /// float precision; 0 makes the check purely relative.
  double floor = 1.0;
  friend void PrintTo(const CudaCase& c, std::ostream* os) { *os << c.name; }
};

/// A node `op` with inputs `inputs`, one output "y" and the given attributes.
Node node_with(const std::string& op, std::vector<std::string> inputs,
               std::map<std::string, Attribute> attributes = {});
/// Random float32 values of `shape` in [lo, hi].
InputSpec floats(Shape shape, double lo = -2.0, double hi = 2.0);
/// A 1-D int64 input holding `values`.
InputSpec int64s(std::vector<int64_t> values);
/// The same as an initializer of the graph (a constant of the plan).
InputSpec constant_int64s(std::vector<int64_t> values);
/// "2x3x4" for {2, 3, 4}, "scalar" for {}.
std::string dims_name(const Shape& shape);

/// The case's inputs on the host; random values are fixed by `seed`.
std::vector<Tensor> make_inputs(const CudaCase& c, unsigned seed);
/// The KernelInfo a CUDA plan would build for the case's node (constant inputs included).
KernelInfo cuda_kernel_info(const CudaCase& c);

/// Expects every CUDA definition (ai.onnx domain, or the graph rewrites' kRewriteDomain) of the
/// ops in `covered` to be run by a case of its domain, opset and dtype (any case of its opsets
/// when it lists no dtypes), and every op in `covered` to have a CUDA definition.
void expect_cases_cover_definitions(const std::vector<CudaCase>& cases,
                                    const std::set<std::string>& covered);
/// Expects every case to be of a covered op and to find a CUDA kernel in the registry.
void expect_every_case_finds_a_cuda_kernel(const std::vector<CudaCase>& cases,
                                           const std::set<std::string>& covered);

/// Expects `got` (on a GPU) to equal `want` (from the CPU): same dtype and shape; floats
/// within 1e-5 * max(|want|, floor), NaN where NaN, infinities equal; other dtypes bit for bit.
void expect_device_output_matches(const Tensor& got, const Tensor& want, double floor);

/// Runs the case's node on cpu:0 and cuda:0 and compares every output. Needs a GPU.
void expect_cuda_matches_cpu(const CudaCase& c, unsigned seed = 1234);

}  // namespace dprun::testing

/// Defines the registry checks and the GPU comparison for a case table: `Suite` names the
/// tests, `cases` is an expression giving a const std::vector<CudaCase>&, `covered` a
/// const std::set<std::string>& of the ops the table covers.
#define DPRUN_CUDA_CASE_TESTS(Suite, cases, covered)                                              \
  TEST(Suite##Cases, EveryCudaDefinitionOfTheseOpsHasACase) {                                     \
    ::dprun::testing::expect_cases_cover_definitions(cases, covered);                             \
  }                                                                                               \
  TEST(Suite##Cases, EveryCaseFindsACudaKernel) {                                                 \
    ::dprun::testing::expect_every_case_finds_a_cuda_kernel(cases, covered);                      \
  }                                                                                               \
  class Suite##MatchesCpu : public ::testing::TestWithParam<::dprun::testing::CudaCase> {};       \
  TEST_P(Suite##MatchesCpu, OnTheSameInputs) {                                                    \
    DPRUN_REQUIRE_CUDA_GPU();                                                                     \
    ::dprun::testing::expect_cuda_matches_cpu(GetParam());                                        \
  }                                                                                               \
  INSTANTIATE_TEST_SUITE_P(Ops, Suite##MatchesCpu, ::testing::ValuesIn(cases),                    \
                           [](const ::testing::TestParamInfo<::dprun::testing::CudaCase>& info) { \
                             return info.param.name;                                              \
                           })
