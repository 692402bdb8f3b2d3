// Every op case table (ops/<family>/*_cases.cpp) on the GPU: each case runs on cuda:0 and on cpu:0
// with the same random inputs, and the outputs must agree (op_cases.h says within what).
#include <gtest/gtest.h>

#include "cuda_test_util.h"
#include "op_cases/op_cases.h"

namespace dprun {
namespace {

using testing::OpCase;

class CudaMatchesCpu : public ::testing::TestWithParam<OpCase> {};

TEST_P(CudaMatchesCpu, OnTheSameInputs) {
  DPRUN_REQUIRE_CUDA_GPU();
  testing::expect_device_matches_cpu(GetParam(), Device::cuda(0));
}

INSTANTIATE_TEST_SUITE_P(Ops, CudaMatchesCpu, ::testing::ValuesIn(testing::all_op_cases()),
                         [](const ::testing::TestParamInfo<OpCase>& info) {
                           return info.param.name;
                         });

}  // namespace
}  // namespace dprun
