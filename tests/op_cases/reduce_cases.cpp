// The CUDA kernels of the Reduce* family, ArgMax/ArgMin, LayerNormalization, Cast and
// CastLike, each compared with the CPU kernel on the same random inputs: one-node models run
// on cuda:0 and on cpu:0. Without a GPU the case table is still checked against the registry
// (every CUDA definition of these ops has a case, every case finds a CUDA kernel), and the
// Cast targets the device does not convert are shown to be declined (they run on the host).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "op_cases/op_cases.h"
#include "op_test_util.h"

namespace dprun {
namespace {

const std::vector<std::string> kReduceOps = {
    "ReduceSum", "ReduceMean", "ReduceMax",    "ReduceMin",       "ReduceProd",
    "ReduceL1",  "ReduceL2",   "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"};

/// The ops whose CUDA kernels this file covers.
const std::set<std::string> kCoveredOps = [] {
  std::set<std::string> ops(kReduceOps.begin(), kReduceOps.end());
  ops.insert({"ArgMax", "ArgMin", "LayerNormalization", "Cast", "CastLike"});
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

void add_layer_norm_cases(std::vector<OpCase>& cases) {
  struct LnShape {
    std::string what;
    Shape x;
    int64_t axis;
    Shape scale;
  };
  const std::vector<LnShape> shapes = {
      {"last", {4, 6, 40}, -1, {40}},
      {"axis1", {4, 6, 40}, 1, {6, 40}},
      {"axis1_broadcast_scale", {4, 6, 40}, 1, {1, 40}},  // Scale expanded on the device
      {"wide_row", {2, 3000}, -1, {3000}},
  };
  for (const LnShape& s : shapes)
    for (int bias = 0; bias < 2; ++bias)
      for (int stats = 0; stats < 2; ++stats)
        for (DType dtype : {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16}) {
          if (dtype != DType::Float32 && (s.what != "last" || !bias || !stats)) continue;
          std::vector<std::string> inputs = {"x", "scale"};
          if (bias) inputs.push_back("b");
          Node node = testing::make_node(
              "LayerNormalization", inputs,
              stats ? std::vector<std::string>{"y", "mean", "inv"} : std::vector<std::string>{"y"});
          node.attributes = {{"axis", Attribute::of_int(s.axis)},
                             {"epsilon", Attribute::of_float(1e-3f)}};
          auto input = [&](const Shape& shape, double lo = -2, double hi = 2) {
            InputSpec spec = floats(shape, lo, hi);
            spec.dtype = dtype;
            return spec;
          };
          std::vector<InputSpec> specs = {input(s.x, -1, 3), input(s.scale)};
          if (bias) specs.push_back(input(s.scale));
          cases.push_back({.name = "LayerNormalization_" + s.what + "_bias" + std::to_string(bias) +
                                   "_stats" + std::to_string(stats) + "_" +
                                   std::string(dtype_name(dtype)),
                           .node = node,
                           .inputs = specs,
                           .opset = 17});
        }
}

/// The dtypes the CUDA Cast definition accepts, from the registry: a dtype added there gets its
/// cases here (and fails them if the harness cannot make its values).
std::vector<DType> cuda_cast_dtypes() {
  for (const KernelDef& def : KernelRegistry::instance().definitions())
    if (def.device == DeviceType::CUDA && def.op_type == "Cast") return def.dtypes;
  return {};
}

/// Random values of `dtype` for a cast: wide enough to saturate, wrap and overflow float16.
InputSpec cast_input(DType dtype, bool whole) {
  InputSpec spec = floats({3, 7, 11});
  spec.dtype = dtype;
  if (whole) {  // small whole numbers: zeros for casts to bool, exact integers
    spec.whole = true;
    spec.lo = -2, spec.hi = 2;
  } else if (is_floating(dtype)) {
    spec.lo = -300, spec.hi = 300;
  } else if (dtype != DType::Bool) {
    spec.lo = -100000, spec.hi = 100000;
  }
  return spec;
}

void add_cast_cases(std::vector<OpCase>& cases) {
  const std::vector<DType> dtypes = cuda_cast_dtypes();
  for (DType from : dtypes)
    for (DType to : dtypes)
      for (int whole = 0; whole < 2; ++whole) {
        if (whole && !is_floating(from)) continue;
        const std::string pair = std::string(dtype_name(from)) + "_to_" +
                                 std::string(dtype_name(to)) + (whole ? "_whole" : "");
        cases.push_back(
            {.name = "Cast_" + pair,
             .node = node_with("Cast", {"x"}, {{"to", Attribute::of_int(static_cast<int>(to))}}),
             .inputs = {cast_input(from, whole != 0)},
             .opset = 13});
      }
  // CastLike: every dtype to float32 and float32 to every dtype.
  for (DType other : dtypes) {
    std::vector<std::pair<DType, DType>> pairs = {{other, DType::Float32}};
    if (other != DType::Float32) pairs.emplace_back(DType::Float32, other);
    for (const auto& [from, to] : pairs) {
      InputSpec like = cast_input(to, false);
      like.shape = {2};
      cases.push_back({.name = "CastLike_" + std::string(dtype_name(from)) + "_to_" +
                               std::string(dtype_name(to)),
                       .node = node_with("CastLike", {"x", "like"}),
                       .inputs = {cast_input(from, false), like},
                       .opset = 15});
    }
  }
}

DPRUN_OP_CASES(Reduce, kCoveredOps, add_reduce_cases, add_arg_cases, add_layer_norm_cases,
               add_cast_cases);

}  // namespace
}  // namespace dprun
