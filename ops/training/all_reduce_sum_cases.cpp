// The rewrite domain's AllReduceSum (ops/training/; engine/autograd/sync_batch_norm.h), which has
// no CUDA kernel but a gradient rule: SyncBatchNorm's sum over replicas, which in a run on its
// own passes X through; in float32 and float64. A GPU's plan runs it on the host: on sim:0 the
// cases check the copies around a host fallback (finite differences check ai.onnx ops only:
// op_cases_gradient_test.cpp).
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "engine/rewrites/rewrite_domain.h"
#include "op_cases/op_cases.h"

namespace dprun {
namespace {

using testing::floats;
using testing::InputSpec;
using testing::node_with;
using testing::of;
using testing::OpCase;

const std::set<std::string> kHostOnlyOps = {"AllReduceSum"};

void add_all_reduce_sum_cases(std::vector<OpCase>& cases) {
  for (DType dtype : {DType::Float32, DType::Float64}) {
    Node n = node_with("AllReduceSum", {"x"});
    n.domain = kRewriteDomain;
    cases.push_back({.name = "AllReduceSum_" + std::string(dtype_name(dtype)),
                     .node = n,
                     .inputs = {of(floats({2, 3}), dtype)},
                     .opset = 1});
  }
}

DPRUN_OP_CASES_WITH_HOST_ONLY(AllReduceSum, {}, kHostOnlyOps, add_all_reduce_sum_cases);

}  // namespace
}  // namespace dprun
