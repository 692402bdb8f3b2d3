#pragma once
// Tables of one-node cases, each in the folder of its ops' family (ops/<family>/*_cases.cpp),
// run on every device type: each lists the ops it covers and its cases, and registers them with
// DPRUN_OP_CASES (no central list). In every build the tables are checked against the kernel
// registry (every CUDA definition of a covered op has a case, every case finds a CUDA kernel;
// a table's host-only ops have none) and against the gradient rules and the CPU's fast paths
// (each has a table), and each case runs on sim:0 and on cpu:0 (tests/unit/op_cases_test.cpp),
// its gradient against finite differences (op_cases_gradient_test.cpp); in a CUDA build
// with a GPU each case runs on cuda:0 against cpu:0 (tests/cuda/cuda_op_cases_test.cpp). The
// same random inputs go to both devices and the outputs must agree.
#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "engine/graph.h"
#include "engine/kernel.h"
#include "engine/tensor.h"

namespace dprun::testing {

/// One graph input: random values of `dtype`, or the given `values` converted to `dtype` (shapes,
/// axes, indices, scales, flags). Random floats lie in [lo, hi], rounded to whole numbers when
/// `whole` (so values repeat: ties for ArgMax, zeros for casts to bool); random integers are the
/// integers in it. A `constant` input is an initializer of the graph instead of a fed input: the
/// plan (and so the kernel's factory) sees its value. A `special` float input has NaN, +inf and
/// -inf in turn in every fourth element.
struct InputSpec {
  Shape shape;
  DType dtype = DType::Float32;
  std::vector<int64_t> values;
  double lo = -2.0, hi = 2.0;
  bool constant = false;
  bool whole = false;
  bool special = false;
};

/// One node run on a device and on the CPU.
struct OpCase {
  std::string name;  // the test's name suffix: letters, digits and '_' only
  Node node;
  std::vector<InputSpec> inputs;
  int64_t opset = 17;
  /// Floats agree to 1e-5 relative: |device - cpu| <= 1e-5 * max(|cpu|, floor). A floor of 1
  /// keeps sums of products of O(1) values that cancel to near 0 from demanding more than
  /// float precision; 0 makes the check purely relative.
  double floor = 1.0;
  friend void PrintTo(const OpCase& c, std::ostream* os) { *os << c.name; }
};

/// A node `op` with inputs `inputs`, one output "y" and the given attributes.
Node node_with(const std::string& op, std::vector<std::string> inputs,
               std::map<std::string, Attribute> attributes = {});
/// Random float32 values of `shape` in [lo, hi].
InputSpec floats(Shape shape, double lo = -2.0, double hi = 2.0);
/// `spec` with its dtype set to `dtype`.
InputSpec of(InputSpec spec, DType dtype);
/// A 1-D int64 input holding `values`.
InputSpec int64s(std::vector<int64_t> values);
/// The same as an initializer of the graph (a constant of the plan).
InputSpec constant_int64s(std::vector<int64_t> values);
/// A 0-d input of `dtype` holding `value` (a constant of the plan when `constant`).
InputSpec scalar(DType dtype, double value, bool constant = false);
/// "2x3x4" for {2, 3, 4}, "scalar" for {}.
std::string dims_name(const Shape& shape);

/// The dtypes the CUDA definition of `op` (of `domain`) lists, for a table to make a case of
/// each; fails the calling test when there is no such definition.
std::vector<DType> cuda_definition_dtypes(const std::string& op, const std::string& domain = "");

/// The case's inputs on the host; random values are fixed by `seed`.
std::vector<Tensor> make_inputs(const OpCase& c, unsigned seed);
/// The KernelInfo a CUDA plan would build for the case's node (constant inputs included).
KernelInfo cuda_kernel_info(const OpCase& c);

/// Expects every CUDA definition (ai.onnx domain, or the graph rewrites' kRewriteDomain) of the
/// ops in `covered` to be run by a case of its domain, opset and dtype (any case of its opsets
/// when it lists no dtypes), and every op in `covered` to have a CUDA definition.
void expect_cases_cover_definitions(const std::vector<OpCase>& cases,
                                    const std::set<std::string>& covered);
/// Expects every case to be of a covered op and to find a CUDA kernel in the registry.
void expect_every_case_finds_a_cuda_kernel(const std::vector<OpCase>& cases,
                                           const std::set<std::string>& covered);
/// Expects every op in `host_only` to have no CUDA definition (of the domains above), and
/// every case of one to find no CUDA kernel: a GPU's plan runs it on the host.
void expect_host_only_ops_have_no_cuda_kernel(const std::vector<OpCase>& cases,
                                              const std::set<std::string>& host_only);

/// Expects `got` (on a device) to equal `want` (from the CPU): same dtype and shape; floats
/// within 1e-5 * max(|want|, floor), NaN where NaN, infinities equal; other dtypes bit for bit.
void expect_device_output_matches(const Tensor& got, const Tensor& want, double floor);

/// Runs the case's node on cpu:0 and on `device` and compares every output: on a GPU as
/// expect_device_output_matches; on a simulated device, which runs the CPU's kernels, bit for bit.
void expect_device_matches_cpu(const OpCase& c, Device device, unsigned seed = 1234);

/// Appends some of a family's cases.
using AddCases = void (*)(std::vector<OpCase>& cases);

/// A family's table: the ops it covers and the functions that make its cases.
struct OpCaseTable {
  std::string family;  // the prefix of its cases' test names: letters and digits
  std::set<std::string> covered;
  std::vector<AddCases> adders;
  /// The cases the adders make, made once.
  const std::vector<OpCase>& cases() const;
  mutable std::optional<std::vector<OpCase>> made;  // filled by cases()
  /// Ops without a CUDA kernel that the table covers for their gradient rule or CPU fast path:
  /// a GPU's plan runs them on the host, so on sim:0 their cases check the host fallback's
  /// copies, and their gradients are checked by finite differences.
  std::set<std::string> host_only = {};
  /// The file that registered the table (DPRUN_OP_CASES sets it): a table lives in the folder
  /// of its ops' family (tests/unit/op_units_test.cpp).
  std::string source = {};
};

/// Registers `table`, written in the file `source`; DPRUN_OP_CASES calls it at static
/// initialisation.
bool register_op_case_table(OpCaseTable table, const char* source);
/// Every registered table, in registration order.
const std::vector<OpCaseTable>& op_case_tables();
/// The cases of the table of `family`; fails the calling test when there is none.
const std::vector<OpCase>& op_cases_of(const std::string& family);
/// The cases of every table, each named "Family_Case".
std::vector<OpCase> all_op_cases();

}  // namespace dprun::testing

/// Registers the table of `Family`: `covered` a std::set<std::string> of the ops whose every
/// CUDA definition it must run, then the functions (AddCases) that append its cases.
#define DPRUN_OP_CASES(Family, covered, ...)                   \
  [[maybe_unused]] static const bool dprun_op_cases_##Family = \
      ::dprun::testing::register_op_case_table({#Family, covered, {__VA_ARGS__}, {}}, __FILE__)
/// The same for a table that also covers ops without a CUDA kernel (OpCaseTable::host_only,
/// a std::set<std::string>).
#define DPRUN_OP_CASES_WITH_HOST_ONLY(Family, covered, host_only, ...)                           \
  [[maybe_unused]] static const bool dprun_op_cases_##Family =                                   \
      ::dprun::testing::register_op_case_table({#Family, covered, {__VA_ARGS__}, {}, host_only}, \
                                               __FILE__)
