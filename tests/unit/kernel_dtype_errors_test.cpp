// The one-line errors kernels give for an input dtype they do not take: each kernel words its
// own, while the dispatch over dtypes is engine/dtype.h's visitor. (DFT's and the losses' own
// dtype errors cannot be reached this way: their registered dtypes already turn an int32
// input away when the plan is made.)
#include <gtest/gtest.h>

#include "op_test_util.h"

namespace dprun {
namespace {

using testing::make_node;
using testing::run_node_error;

TEST(KernelDtypeErrors, LpNormalizationTakesFloatingTypesOnly) {
  Node n = make_node("LpNormalization", {"x"}, {"y"});
  EXPECT_EQ(run_node_error(n, {Tensor::from_vector<int32_t>({2, 2}, {1, 2, 3, 4})}, 1),
            "[LpNormalization] node 'LpNormalization_under_test': input dtype int32 is not "
            "supported (floating types only)");
}

TEST(KernelDtypeErrors, AxisKernelsTakeFloatsAndIntegersOnly) {
  const Tensor flags = Tensor::from_vector<bool>({2, 2}, {true, false, false, true});
  EXPECT_EQ(run_node_error(make_node("ArgMax", {"x"}, {"y"}), {flags}, 13),
            "[ArgMax] node 'ArgMax_under_test': input dtype bool is not supported");
  EXPECT_EQ(run_node_error(make_node("CumSum", {"x", "axis"}, {"y"}),
                           {flags, Tensor::scalar<int64_t>(0)}, 14),
            "[CumSum] node 'CumSum_under_test': input dtype bool is not supported");
}

// The axis walk's range check, with each kernel's axis as given (negative ones too).
TEST(KernelDtypeErrors, AxisOutOfRangeNamesTheShape) {
  const Tensor x = Tensor::from_vector<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  EXPECT_EQ(run_node_error(make_node("CumSum", {"x", "axis"}, {"y"}),
                           {x, Tensor::scalar<int64_t>(2)}, 14),
            "[CumSum] node 'CumSum_under_test': axis 2 is out of range for input shape [2, 3]");
  Node topk = make_node("TopK", {"x", "k"}, {"v", "i"});
  topk.attributes["axis"] = Attribute::of_int(-3);
  EXPECT_EQ(run_node_error(topk, {x, Tensor::from_vector<int64_t>({1}, {1})}, 11),
            "[TopK] node 'TopK_under_test': axis -3 is out of range for input shape [2, 3]");
}

}  // namespace
}  // namespace dprun
