// DepthToSpace (DCR and CRD) and SpaceToDepth (ops/array/), which have no CUDA kernel but
// gradient rules: float32, float64 and int64 at opset 13, and float32 at opset 1 with blocksize 3
// (before opset 11 DepthToSpace has no mode: DCR). A GPU's plan runs them on the host: on sim:0
// the cases check the copies around a host fallback, and finite differences check the gradient
// rules.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "op_cases/op_cases.h"

namespace dprun {
namespace {

using testing::floats;
using testing::InputSpec;
using testing::node_with;
using testing::OpCase;

const std::set<std::string> kHostOnlyOps = {"DepthToSpace", "SpaceToDepth"};

void add_depth_space_cases(std::vector<OpCase>& cases) {
  for (DType dtype : {DType::Float32, DType::Float64, DType::Int64}) {
    const std::string type(dtype_name(dtype));
    for (const std::string mode : {"DCR", "CRD"}) {
      InputSpec x = floats({2, 8, 3, 4});
      x.dtype = dtype;
      cases.push_back({.name = "DepthToSpace_" + mode + "_" + type,
                       .node = node_with("DepthToSpace", {"x"},
                                         {{"blocksize", Attribute::of_int(2)},
                                          {"mode", Attribute::of_string(mode)}}),
                       .inputs = {x},
                       .opset = 13});
    }
    InputSpec x = floats({2, 3, 6, 4});
    x.dtype = dtype;
    cases.push_back(
        {.name = "SpaceToDepth_" + type,
         .node = node_with("SpaceToDepth", {"x"}, {{"blocksize", Attribute::of_int(2)}}),
         .inputs = {x},
         .opset = 13});
  }
  // Before opset 11 DepthToSpace has no mode (DCR); blocksize 3.
  cases.push_back({.name = "DepthToSpace_opset1_blocksize3",
                   .node = node_with("DepthToSpace", {"x"}, {{"blocksize", Attribute::of_int(3)}}),
                   .inputs = {floats({1, 18, 2, 3})},
                   .opset = 1});
  cases.push_back({.name = "SpaceToDepth_opset1_blocksize3",
                   .node = node_with("SpaceToDepth", {"x"}, {{"blocksize", Attribute::of_int(3)}}),
                   .inputs = {floats({1, 2, 6, 9})},
                   .opset = 1});
}

DPRUN_OP_CASES_WITH_HOST_ONLY(DepthSpace, {}, kHostOnlyOps, add_depth_space_cases);

}  // namespace
}  // namespace dprun
