// The op case tables (ops/<family>/*_cases.cpp) in every build: each table against the kernel
// registry, every op with a CUDA kernel, a gradient rule or a CPU fast path against the tables
// (from the registries, so a new one needs cases), and each case on the simulated device sim:0
// against cpu:0. The simulated device plans a node as a GPU would (the CUDA definitions'
// `accepts`) and runs it with the CPU's kernels, so the outputs agree to the last bit unless a
// copy, a host fallback or the stream order is wrong.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "engine/autograd/gradient_registry.h"
#include "engine/kernel.h"
#include "engine/training/optimizer_update.h"
#include "op_cases/op_cases.h"
#include "op_test_util.h"

namespace dprun {
namespace {

using testing::OpCase;
using testing::OpCaseTable;

// The families the tables register, one file each; a table that stops registering fails here.
TEST(OpCaseTables, EachFamilyRegistersOnce) {
  std::set<std::string> families;
  for (const OpCaseTable& table : testing::op_case_tables()) {
    EXPECT_TRUE(families.insert(table.family).second) << table.family << " registered twice";
    EXPECT_FALSE(table.cases().empty()) << table.family;
    EXPECT_FALSE(table.covered.empty() && table.host_only.empty()) << table.family;
  }
  const std::set<std::string> expected = {"AllReduceSum",     "Attention",
                                          "ChannelsLast",     "Conv",
                                          "ConvWeightGrad",   "DataMovement",
                                          "DepthSpace",       "Dropout",
                                          "Einsum",           "ElementwiseBinary",
                                          "ElementwiseUnary", "ElementwiseVariadic",
                                          "FusedProduct",     "IndexOps",
                                          "LinearAlgebra",    "Loss",
                                          "Normalization",    "Pool",
                                          "Recurrent",        "Reduce",
                                          "Resample",         "Scatter",
                                          "Softmax"};
  EXPECT_EQ(families, expected);
}

TEST(OpCaseTables, EveryCudaDefinitionOfACoveredOpHasACase) {
  for (const OpCaseTable& table : testing::op_case_tables()) {
    SCOPED_TRACE(table.family);
    testing::expect_cases_cover_definitions(table.cases(), table.covered);
  }
}

TEST(OpCaseTables, EveryCaseFindsACudaKernel) {
  for (const OpCaseTable& table : testing::op_case_tables()) {
    SCOPED_TRACE(table.family);
    std::vector<OpCase> device_cases;  // the host-only ops' cases are checked below
    for (const OpCase& c : table.cases())
      if (!table.host_only.count(c.node.op_type)) device_cases.push_back(c);
    testing::expect_every_case_finds_a_cuda_kernel(device_cases, table.covered);
  }
}

TEST(OpCaseTables, HostOnlyOpsHaveNoCudaKernel) {
  for (const OpCaseTable& table : testing::op_case_tables()) {
    SCOPED_TRACE(table.family);
    testing::expect_host_only_ops_have_no_cuda_kernel(table.cases(), table.host_only);
    for (const std::string& op : table.host_only) {
      EXPECT_FALSE(table.covered.count(op)) << op << " is both covered and host-only";
      const bool has_case = std::any_of(table.cases().begin(), table.cases().end(),
                                        [&](const OpCase& c) { return c.node.op_type == op; });
      EXPECT_TRUE(has_case) << "no case of the host-only op " << op;
    }
  }
}

/// An op as the registries key it: (domain, op_type).
using OpKey = std::pair<std::string, std::string>;

std::string op_name(const OpKey& op) {
  return op.first.empty() ? op.second : op.first + "." + op.second;
}

/// Why an op needs a table: (a) a CUDA definition, (b) a gradient rule, (c) a CPU fast path.
struct Needs {
  bool cuda = false, gradient = false, fast_path = false;
  std::string text() const {
    std::string s;
    auto add = [&](bool has, const char* what) {
      if (!has) return;
      if (!s.empty()) s += ", ";
      s += what;
    };
    add(cuda, "(a) a CUDA kernel definition");
    add(gradient, "(b) a gradient rule");
    add(fast_path, "(c) a CPU fast path");
    return s;
  }
};

/// Every op of the registries that needs a table. A CPU fast path is a CPU definition other than
/// the reference kernel (engine/kernel.h: fast paths register with their own `impl`, oneDNN's
/// or a direct loop, beside the reference).
std::map<OpKey, Needs> ops_that_need_cases() {
  std::map<OpKey, Needs> ops;
  for (const KernelDef& def : KernelRegistry::instance().definitions()) {
    if (def.device == DeviceType::CUDA) ops[{def.domain, def.op_type}].cuda = true;
    if (def.device == DeviceType::CPU && def.impl != "reference")
      ops[{def.domain, def.op_type}].fast_path = true;
  }
  for (const GradientDef& def : GradientRegistry::instance().definitions())
    ops[{def.domain, def.op_type}].gradient = true;
  return ops;
}

/// The ops some table covers (covered or host-only) and runs a case of.
std::set<OpKey> ops_with_cases() {
  std::set<OpKey> ops;
  for (const OpCaseTable& table : testing::op_case_tables())
    for (const OpCase& c : table.cases())
      if (table.covered.count(c.node.op_type) || table.host_only.count(c.node.op_type))
        ops.insert({c.node.domain, c.node.op_type});
  return ops;
}

/// Ops that cannot run as a one-node case, each with its reason. Kept exact by the test below:
/// each must have a property that needs a table and no case.
const std::map<OpKey, std::string>& ops_without_cases() {
  // The optimizers' update kernels are not ops for graphs: their factories decline a node in a
  // graph (make_update_kernel), so a one-node model fails at load (checked below). Their
  // kernels have tests of their own (optimizer_functors_test.cpp, cuda_optimizer_test.cpp).
  const std::string update = "an optimizer update kernel, which no graph may hold";
  static const std::map<OpKey, std::string> exempt = {
      {{kDprunDomain, kAdamUpdateOp}, update},
      {{kDprunDomain, kAddGradientOp}, update},
      {{kDprunDomain, kGradientNormOp}, update},
      {{kDprunDomain, kScaleGradientOp}, update},
      {{kDprunDomain, kSgdUpdateOp}, update},
      // Registered by a unit test of the same binary to place a node on a GPU; not an op.
      {{"dprun.placement_test", "OnCuda"}, "tests/unit/plan_placement_test.cpp's stand-in"},
  };
  return exempt;
}

// Walks the registries, not a list: an op that gains a CUDA kernel, a gradient rule or a CPU
// fast path fails here until a table runs it (on sim:0 against cpu:0, and against finite
// differences where it has a gradient rule).
TEST(OpCaseTables, EveryOpWithACudaKernelGradientRuleOrCpuFastPathHasCases) {
  const std::set<OpKey> with_cases = ops_with_cases();
  const std::map<OpKey, std::string>& exempt = ops_without_cases();
  std::string missing;
  int count = 0;
  for (const auto& [op, needs] : ops_that_need_cases()) {
    if (with_cases.count(op) || exempt.count(op)) continue;
    missing += "\n  " + op_name(op) + ": " + needs.text();
    ++count;
  }
  EXPECT_EQ(count, 0) << count
                      << " ops have no case in any table (ops/<family>/*_cases.cpp):" << missing;
}

TEST(OpCaseTables, ExemptedOpsNeedATableAndHaveNoCase) {
  const std::set<OpKey> with_cases = ops_with_cases();
  const std::map<OpKey, Needs> needing = ops_that_need_cases();
  for (const auto& [op, reason] : ops_without_cases()) {
    SCOPED_TRACE(op_name(op) + " (" + reason + ")");
    EXPECT_TRUE(needing.count(op)) << "exempted, but it needs no table: drop it from the list";
    EXPECT_FALSE(with_cases.count(op)) << "exempted, but a table has cases: drop it from the list";
  }
}

// The update kernels' exemption holds: a one-node model of one fails at load.
TEST(OpCaseTables, UpdateKernelsCannotRunAsOneNodeModels) {
  int checked = 0;
  for (const auto& [op, reason] : ops_without_cases()) {
    if (op.first != kDprunDomain) continue;
    SCOPED_TRACE(op_name(op));
    Node n = testing::make_node(op.second, {"x", "g"}, {"y"});
    n.domain = op.first;
    const Tensor x = Tensor::from_vector<float>({2}, {1, 2});
    const std::string error = testing::run_node_error(n, {x, x}, 1, op.first);
    // Declined by the factory (make_update_kernel), not for its inputs.
    EXPECT_NE(error.find("no kernel accepts this node"), std::string::npos) << error;
    ++checked;
  }
  EXPECT_EQ(checked, 5);
}

TEST(OpCaseTables, NamesAreUniqueAcrossTables) {
  std::set<std::string> names;
  for (const OpCase& c : testing::all_op_cases())
    EXPECT_TRUE(names.insert(c.name).second) << c.name;
}

class SimMatchesCpu : public ::testing::TestWithParam<OpCase> {};

TEST_P(SimMatchesCpu, OnTheSameInputs) {
  testing::expect_device_matches_cpu(GetParam(), Device::sim(0));
}

INSTANTIATE_TEST_SUITE_P(Ops, SimMatchesCpu, ::testing::ValuesIn(testing::all_op_cases()),
                         [](const ::testing::TestParamInfo<OpCase>& info) {
                           return info.param.name;
                         });

}  // namespace
}  // namespace dprun
