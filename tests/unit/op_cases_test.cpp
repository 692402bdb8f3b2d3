// The op case tables (tests/op_cases/) in every build: each table against the kernel registry,
// and each case on the simulated device sim:0 against cpu:0. The simulated device plans a node
// as a GPU would (the CUDA definitions' `accepts`) and runs it with the CPU's kernels, so the
// outputs agree to the last bit unless a copy, a host fallback or the stream order is wrong.
#include <gtest/gtest.h>

#include <set>

#include "op_cases/op_cases.h"

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
    EXPECT_FALSE(table.covered.empty()) << table.family;
  }
  EXPECT_EQ(families, (std::set<std::string>{"ClipPadRange", "ConvPoolNorm", "ConvWeightGrad",
                                             "DataMovement", "FusedProduct", "GradientFusion",
                                             "LinearAlgebra", "Loss", "Reduce", "Scatter"}));
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
    testing::expect_every_case_finds_a_cuda_kernel(table.cases(), table.covered);
  }
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
