// The CUDA kernels of Softmax and LogSoftmax (ops/softmax/), each compared with the CPU kernel
// on the same random inputs: one-node models run on cuda:0 and on cpu:0. The last axis, the
// default axis, a strided middle axis and the first; before opset 13 the input coerced to 2-D
// at the axis; rows longer than a block; a 0-d input; float16 and bfloat16, computed in float,
// over rows and columns. The case table also checks, without a GPU, that every CUDA definition
// of these ops is exercised by some case and that every case finds a CUDA kernel.
#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "op_cases/op_cases.h"

namespace dprun {
namespace {

/// The ops whose CUDA kernels this file covers.
const std::set<std::string> kCoveredOps = {"Softmax", "LogSoftmax"};

using testing::floats;
using testing::node_with;
using testing::OpCase;

void add_softmax_cases(std::vector<OpCase>& cases) {
  for (const std::string op : {"Softmax", "LogSoftmax"}) {
    auto add = [&](const std::string& name, Shape shape, int64_t opset,
                   std::optional<int64_t> axis) {
      std::map<std::string, Attribute> attrs;
      if (axis) attrs["axis"] = Attribute::of_int(*axis);
      cases.push_back({.name = op + "_" + name,
                       .node = node_with(op, {"x"}, attrs),
                       .inputs = {floats(std::move(shape))},
                       .opset = opset,
                       // Softmax values are positive and do not cancel; LogSoftmax's x - shift
                       // can, so it keeps the floor of 1.
                       .floor = op == "Softmax" ? 0.0 : 1.0});
    };
    add("2x3x70_axis_last", {2, 3, 70}, 13, -1);
    add("2x3x70_default_axis", {2, 3, 70}, 13, std::nullopt);
    add("2x3x70_axis1", {2, 3, 70}, 13, 1);  // strided: inner = 70
    add("2x3x70_axis0", {2, 3, 70}, 13, 0);
    add("2x3x70_opset11_axis1", {2, 3, 70}, 11, 1);  // coerced to [2, 210]
    add("2x3x70_opset11_default_axis", {2, 3, 70}, 11, std::nullopt);
    add("4x5000_wide_row", {4, 5000}, 13, -1);  // longer than a block
    add("scalar", {}, 13, std::nullopt);
    // float16 and bfloat16, computed in float: rows and columns.
    for (DType dtype : {DType::Float16, DType::BFloat16}) {
      const std::string type(dtype_name(dtype));
      add("2x3x70_axis_last_" + type, {2, 3, 70}, 13, -1);
      cases.back().inputs[0].dtype = dtype;
      add("2x3x70_axis1_" + type, {2, 3, 70}, 13, 1);
      cases.back().inputs[0].dtype = dtype;
    }
  }
}

DPRUN_OP_CASES(Softmax, kCoveredOps, add_softmax_cases);

}  // namespace
}  // namespace dprun
