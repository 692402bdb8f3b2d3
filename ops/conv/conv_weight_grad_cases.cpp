// The CUDA kernel of a Conv's weight gradient (ConvWeightGrad, engine/rewrites/op_fusion.h) on
// cuDNN's backward-filter convolution, compared with the CPU kernel on the same random inputs:
// the geometries of the CPU's tests (ResNet's, a stem, asymmetric pads with a dilation, 1-D and
// 3-D, rows a stride leaves unused) and dY shapes that are no convolution's output, which the
// kernel places X for in a zeroed tensor.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "engine/rewrites/rewrite_domain.h"
#include "op_cases/op_cases.h"

namespace dprun {
namespace {

const std::set<std::string> kCoveredOps = {"ConvWeightGrad"};

using testing::floats;
using testing::node_with;
using testing::OpCase;

struct WeightGradCase {
  std::string name;
  Shape x, dy;
  std::vector<int64_t> kernel, strides, dilations, pads;
};

void add_cases(std::vector<OpCase>& cases) {
  const std::vector<WeightGradCase> table = {
      {"3x3_stride1", {2, 4, 7, 7}, {2, 5, 7, 7}, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}},
      {"3x3_stride2_unused_row",
       {2, 3, 10, 10},
       {2, 4, 5, 5},
       {3, 3},
       {2, 2},
       {1, 1},
       {1, 1, 1, 1}},
      {"1x1_stride2_unused_row", {3, 4, 10, 9}, {3, 6, 5, 5}, {1, 1}, {2, 2}, {1, 1}, {0, 0, 0, 0}},
      {"7x7_stride2_stem", {2, 3, 12, 12}, {2, 4, 6, 6}, {7, 7}, {2, 2}, {1, 1}, {3, 3, 3, 3}},
      {"asymmetric_pads_dilation",
       {2, 2, 6, 5},
       {2, 3, 3, 4},
       {3, 2},
       {2, 1},
       {1, 2},
       {1, 0, 0, 1}},
      {"1d_stride3", {2, 3, 11}, {2, 4, 4}, {2}, {3}, {1}, {2, 0}},
      {"3d_stride2",
       {2, 2, 5, 4, 5},
       {2, 3, 2, 2, 2},
       {2, 2, 2},
       {2, 2, 2},
       {1, 1, 1},
       {0, 0, 0, 0, 0, 0}},
      {"dy_shorter_than_the_output",
       {2, 3, 9, 9},
       {2, 4, 3, 4},
       {3, 3},
       {2, 2},
       {1, 1},
       {0, 0, 0, 0}},
      {"window_shorter_than_the_kernel",
       {1, 2, 5, 6},
       {1, 3, 3, 2},
       {3, 3},
       {2, 2},
       {1, 1},
       {0, 0, 0, 0}},
      {"empty_batch", {0, 2, 4, 4}, {0, 3, 4, 4}, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}},
  };
  for (const WeightGradCase& t : table) {
    Node n = node_with("ConvWeightGrad", {"x", "dy"},
                       {{"kernel_shape", Attribute::of_ints(t.kernel)},
                        {"strides", Attribute::of_ints(t.strides)},
                        {"dilations", Attribute::of_ints(t.dilations)},
                        {"pads", Attribute::of_ints(t.pads)}});
    n.domain = kRewriteDomain;
    cases.push_back({.name = "ConvWeightGrad_" + t.name,
                     .node = std::move(n),
                     .inputs = {floats(t.x), floats(t.dy)},
                     .opset = 1});
  }
}

DPRUN_OP_CASES(ConvWeightGrad, kCoveredOps, add_cases);

}  // namespace
}  // namespace dprun
