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

}  // namespace
}  // namespace dprun
