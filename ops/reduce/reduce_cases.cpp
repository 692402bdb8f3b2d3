// The CUDA kernels of the reduce family (ops/reduce/): the Reduce* ops and ArgMax/ArgMin, each
// compared with the CPU kernel on the same random inputs: one-node models run on cuda:0 and on
// cpu:0. Each reduction over rows, columns, middle and nonadjacent axes, every axis, short and
// wide rows, with axes as an attribute and as an input, empty axes, an empty reduced dimension,
// and in float64, float16, bfloat16, int32 and int64; ArgMax and ArgMin with many ties, keepdims
// and select_last_index, and in float16 and bfloat16. Without a GPU the case table is still checked
// against the registry (every CUDA definition of these ops has a case, every case finds a CUDA
// kernel).
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "op_cases/op_cases.h"

namespace dprun {
namespace {

const std::vector<std::string> kReduceOps = {
    "ReduceSum", "ReduceMean", "ReduceMax",    "ReduceMin",       "ReduceProd",
    "ReduceL1",  "ReduceL2",   "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"};

/// The ops whose CUDA kernels this file covers.
const std::set<std::string> kCoveredOps = [] {
  std::set<std::string> ops(kReduceOps.begin(), kReduceOps.end());
  ops.insert({"ArgMax", "ArgMin"});
  return ops;
}();

using testing::dims_name;
using testing::floats;
using testing::InputSpec;
using testing::int64s;
using testing::node_with;
using testing::OpCase;

/// Values each reduction is tested on: positive where a logarithm is taken, near 1 for
/// products of many elements.
InputSpec reduce_input(const std::string& op, Shape shape, DType dtype = DType::Float32) {
  InputSpec spec = floats(std::move(shape));
  spec.dtype = dtype;
  if (op == "ReduceLogSum") spec.lo = 0.5;
  if (op == "ReduceProd") spec.lo = 0.9, spec.hi = 1.1;
  // Integers: small, and positive under a logarithm (an integer NaN or -inf result would be
  // an undefined conversion on both devices).
  if (dtype == DType::Int32 || dtype == DType::Int64)
    spec.lo = op == "ReduceLogSum" ? 1 : -5, spec.hi = 5;
  return spec;
}

/// One reduction layout: input shape, axes (nullopt: none given), keepdims.
struct ReduceShape {
  std::string what;
  Shape shape;
  std::optional<std::vector<int64_t>> axes;
  int keepdims;
};

const std::vector<ReduceShape> kReduceShapes = {
    {"last", {4, 6, 50}, std::vector<int64_t>{-1}, 1},           // rows, one block each
    {"first", {4, 6, 50}, std::vector<int64_t>{0}, 0},           // [reduced, kept] columns
    {"middle", {4, 6, 50}, std::vector<int64_t>{1}, 1},          // [kept, reduced, kept]
    {"nonadjacent", {4, 6, 50}, std::vector<int64_t>{0, 2}, 0},  // transposed first
    {"nonadjacent4d", {3, 4, 5, 6}, std::vector<int64_t>{1, 3}, 1},
    {"all", {4, 6, 50}, std::nullopt, 0},                          // no axes: every axis
    {"short_rows", {5, 7}, std::vector<int64_t>{1}, 0},            // a thread per row
    {"wide_row", {2, 3000}, std::vector<int64_t>{1}, 1},           // rows beyond 1024 threads
    {"size1_dims", {1, 4, 1, 50}, std::vector<int64_t>{0, 3}, 1},  // merges around 1s
};

void add_reduce_cases(std::vector<OpCase>& cases) {
  for (const std::string& op : kReduceOps) {
    const int64_t input_since = op == "ReduceSum" ? 13 : 18;
    for (const ReduceShape& s : kReduceShapes) {
      const std::string suffix = s.what + "_keepdims" + std::to_string(s.keepdims);
      // Axes as an attribute (the opsets before input_since).
      std::map<std::string, Attribute> attrs = {{"keepdims", Attribute::of_int(s.keepdims)}};
      if (s.axes) attrs["axes"] = Attribute::of_ints(*s.axes);
      cases.push_back({.name = op + "_attr_" + suffix,
                       .node = node_with(op, {"x"}, attrs),
                       .inputs = {reduce_input(op, s.shape)},
                       .opset = 11});
      // Axes as an input.
      OpCase c{.name = op + "_input_" + suffix,
               .node = node_with(op, {"x"}, {{"keepdims", Attribute::of_int(s.keepdims)}}),
               .inputs = {reduce_input(op, s.shape)},
               .opset = input_since};
      if (s.axes) {
        c.node.inputs.push_back("axes");
        c.inputs.push_back(int64s(*s.axes));
      }
      cases.push_back(std::move(c));
    }
    // Attribute axes given but empty: all axes.
    cases.push_back({.name = op + "_attr_empty_axes",
                     .node = node_with(op, {"x"}, {{"axes", Attribute::of_ints({})}}),
                     .inputs = {reduce_input(op, {3, 40})},
                     .opset = 11});
    // An empty axes input: all axes, or the input itself with noop_with_empty_axes.
    for (int noop = 0; noop < 2; ++noop)
      cases.push_back({.name = op + "_empty_axes_input_noop" + std::to_string(noop),
                       .node = node_with(op, {"x", "axes"},
                                         {{"noop_with_empty_axes", Attribute::of_int(noop)}}),
                       .inputs = {reduce_input(op, {3, 40}), {.shape = {0}, .dtype = DType::Int64}},
                       .opset = input_since});
    // A reduced dimension of size 0: the reduction's identity.
    cases.push_back({.name = op + "_empty_reduction",
                     .node = node_with(op, {"x"}, {{"axes", Attribute::of_ints({1})}}),
                     .inputs = {reduce_input(op, {3, 0, 2})},
                     .opset = 11});
    // The other dtypes, over rows and columns.
    for (DType dtype :
         {DType::Float64, DType::Float16, DType::BFloat16, DType::Int32, DType::Int64})
      for (int64_t axis : {0, 1})
        cases.push_back(
            {.name = op + "_" + std::string(dtype_name(dtype)) + "_axis" + std::to_string(axis),
             .node = node_with(op, {"x"}, {{"axes", Attribute::of_ints({axis})}}),
             .inputs = {reduce_input(op, {6, 64}, dtype)},
             .opset = 11});
  }
}

void add_arg_cases(std::vector<OpCase>& cases) {
  struct ArgShape {
    Shape shape;
    int64_t axis;
  };
  const std::vector<ArgShape> shapes = {
      {{4, 50}, 1},     // rows, one block each
      {{4, 6, 5}, 1},   // strided: a thread per output
      {{3, 5}, -1},     // short rows: a thread per output
      {{2, 3000}, -1},  // wide rows
      {{7, 4}, 0},
  };
  for (const std::string op : {"ArgMax", "ArgMin"})
    for (const ArgShape& s : shapes)
      for (int keepdims = 0; keepdims < 2; ++keepdims)
        for (int last = 0; last < 2; ++last) {
          // Whole numbers in [0, 3]: many ties, so the first/last rule matters.
          InputSpec x = floats(s.shape, 0, 3);
          x.whole = true;
          std::string name = op + "_" + dims_name(s.shape) + "_axis";
          if (s.axis < 0) name += 'm';
          name += std::to_string(std::abs(s.axis));
          name += "_keepdims" + std::to_string(keepdims) + "_last" + std::to_string(last);
          cases.push_back({.name = name,
                           .node = node_with(op, {"x"},
                                             {{"axis", Attribute::of_int(s.axis)},
                                              {"keepdims", Attribute::of_int(keepdims)},
                                              {"select_last_index", Attribute::of_int(last)}}),
                           .inputs = {x},
                           .opset = 13});
        }
  // 16-bit inputs, widened to float for the comparisons: the row and column kernels.
  for (const std::string op : {"ArgMax", "ArgMin"})
    for (DType dtype : {DType::Float16, DType::BFloat16})
      for (const ArgShape& s : {shapes[0], shapes[1]}) {
        InputSpec x = floats(s.shape, 0, 3);
        x.whole = true;
        x.dtype = dtype;
        cases.push_back({.name = op + "_" + std::string(dtype_name(dtype)) + "_" +
                                 dims_name(s.shape) + "_axis" + std::to_string(s.axis),
                         .node = node_with(op, {"x"}, {{"axis", Attribute::of_int(s.axis)}}),
                         .inputs = {x},
                         .opset = 13});
      }
}

DPRUN_OP_CASES(Reduce, kCoveredOps, add_reduce_cases, add_arg_cases);

}  // namespace
}  // namespace dprun
