// Ops without a CUDA kernel that have gradient rules, of the indexing family: GatherElements,
// GatherND (with batch_dims), ScatterND (each reduction), TopK (k as attribute and as input,
// largest, sorted), CumSum (exclusive, reverse) and Trilu (upper, lower, k). Each at the opsets
// where its signature or its gradient rule's form changes (the rules of GatherElements and GatherND
// build a OneHot before opset 16 and scatter with "add" from 16), in float32, float64 and an
// integer type. A GPU's plan runs them on the host: on sim:0 the cases check the copies around a
// host fallback, and finite differences check the gradient rules. Indices are in range
// (negative ones count from the end) and, where a scatter overwrites, distinct.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "op_cases/op_cases.h"
#include "op_test_util.h"

namespace dprun {
namespace {

using testing::dims_name;
using testing::floats;
using testing::InputSpec;
using testing::node_with;
using testing::OpCase;

const std::set<std::string> kHostOnlyOps = {"GatherElements", "GatherND", "ScatterND",
                                            "TopK",           "CumSum",   "Trilu"};

const std::vector<DType> kDtypes = {DType::Float32, DType::Float64, DType::Int32};

/// `spec` in `dtype`; integers drawn from [-20, 20].
InputSpec typed(InputSpec spec, DType dtype) {
  spec.dtype = dtype;
  if (!is_floating(dtype)) spec.lo = -20, spec.hi = 20;
  return spec;
}

/// Random int64 indices in [lo, hi].
InputSpec indices(Shape shape, int64_t lo, int64_t hi) {
  return {.shape = std::move(shape), .dtype = DType::Int64, .lo = double(lo), .hi = double(hi)};
}

/// The given int64 values as a tensor of `shape`.
InputSpec fixed(Shape shape, std::vector<int64_t> values) {
  return {.shape = std::move(shape), .dtype = DType::Int64, .values = std::move(values)};
}

std::string type_name(DType dtype) {
  return std::string(dtype_name(dtype));
}

void add_gather_elements_cases(std::vector<OpCase>& cases) {
  // Indices longer than the axis (repeats, which the gradient sums) or shorter, on each axis.
  struct Gather {
    Shape data, idx;
    int64_t axis;
  };
  const std::vector<Gather> gathers = {
      {{3, 4, 5}, {3, 6, 5}, 1}, {{3, 4, 5}, {2, 4, 5}, 0}, {{3, 4, 5}, {3, 4, 7}, -1}};
  for (int64_t opset : {13, 17})
    for (const Gather& g : gathers)
      for (DType dtype : kDtypes) {
        if (opset == 13 && dtype != DType::Float32) continue;
        const int64_t dim = g.data[static_cast<size_t>(g.axis < 0 ? g.axis + 3 : g.axis)];
        cases.push_back({.name = "GatherElements_opset" + std::to_string(opset) + "_axis" +
                                 (g.axis < 0 ? "m1" : std::to_string(g.axis)) + "_" +
                                 type_name(dtype),
                         .node = node_with("GatherElements", {"data", "indices"},
                                           {{"axis", Attribute::of_int(g.axis)}}),
                         .inputs = {typed(floats(g.data), dtype), indices(g.idx, -dim, dim - 1)},
                         .opset = opset});
      }
}

void add_gather_nd_cases(std::vector<OpCase>& cases) {
  struct GatherNd {
    std::string what;
    Shape data, idx;
    int64_t lo, hi, batch_dims;
  };
  const std::vector<GatherNd> gathers = {
      {"elements", {2, 3, 4}, {5, 3}, -2, 1, 0},   // full tuples: single elements
      {"slices", {2, 3, 4}, {2, 2, 2}, -2, 1, 0},  // tuples of 2: rows of 4
      {"rows", {4, 3}, {3, 1}, -4, 3, 0},          // tuples of 1
      {"batch1", {2, 3, 4}, {2, 2, 1}, -3, 2, 1},  // within each batch entry
  };
  for (int64_t opset : {13, 17})
    for (const GatherNd& g : gathers)
      for (DType dtype : kDtypes) {
        if (opset == 13 && dtype != DType::Float32) continue;
        cases.push_back({.name = "GatherND_opset" + std::to_string(opset) + "_" + g.what + "_" +
                                 type_name(dtype),
                         .node = node_with("GatherND", {"data", "indices"},
                                           {{"batch_dims", Attribute::of_int(g.batch_dims)}}),
                         .inputs = {typed(floats(g.data), dtype), indices(g.idx, g.lo, g.hi)},
                         .opset = opset});
      }
  // Opset 11, before batch_dims.
  cases.push_back({.name = "GatherND_opset11_slices",
                   .node = node_with("GatherND", {"data", "indices"}),
                   .inputs = {floats({2, 3, 4}), indices({2, 2, 2}, -2, 1)},
                   .opset = 11});
}

void add_scatter_nd_cases(std::vector<OpCase>& cases) {
  // data [4, 3]: rows 0 and 2 overwritten (distinct), or rows 1, 1 and 3 reduced into.
  const InputSpec distinct = fixed({2, 1}, {0, -2});
  const InputSpec repeated = fixed({3, 1}, {1, 1, 3});
  for (DType dtype : kDtypes) {
    cases.push_back(
        {.name = "ScatterND_rows_" + type_name(dtype),
         .node = node_with("ScatterND", {"data", "indices", "updates"}),
         .inputs = {typed(floats({4, 3}), dtype), distinct, typed(floats({2, 3}), dtype)},
         .opset = 17});
    cases.push_back(
        {.name = "ScatterND_add_" + type_name(dtype),
         .node = node_with("ScatterND", {"data", "indices", "updates"},
                           {{"reduction", Attribute::of_string("add")}}),
         .inputs = {typed(floats({4, 3}), dtype), repeated, typed(floats({3, 3}), dtype)},
         .opset = 17});
  }
  // Single elements of a 3-D data, at opset 11 (no reduction attribute yet).
  cases.push_back(
      {.name = "ScatterND_opset11_elements",
       .node = node_with("ScatterND", {"data", "indices", "updates"}),
       .inputs = {floats({2, 3, 4}), fixed({3, 3}, {0, 0, 0, 1, 2, 3, -1, -2, -3}), floats({3})},
       .opset = 11});
  // mul (16), max and min (18). The rule refuses them (their gradients depend on the other
  // updates): op_cases_gradient_test.cpp expects the refusal of the float cases.
  for (const std::string reduction : {"mul", "max", "min"})
    for (DType dtype : kDtypes)
      cases.push_back(
          {.name = "ScatterND_" + reduction + "_" + type_name(dtype),
           .node = node_with("ScatterND", {"data", "indices", "updates"},
                             {{"reduction", Attribute::of_string(reduction)}}),
           .inputs = {typed(floats({4, 3}), dtype), repeated, typed(floats({3, 3}), dtype)},
           .opset = 18});
}

void add_topk_cases(std::vector<OpCase>& cases) {
  auto topk = [](std::vector<std::string> inputs, std::map<std::string, Attribute> attributes) {
    Node n = testing::make_node("TopK", std::move(inputs), {"values", "indices"});
    n.attributes = std::move(attributes);
    return n;
  };
  // k as an attribute (before opset 10). The rule needs opset 9 (Scatter): at 1
  // op_cases_gradient_test.cpp expects the refusal.
  for (int64_t opset : {1, 9})
    cases.push_back({.name = "TopK_opset" + std::to_string(opset) + "_k_attribute",
                     .node = topk({"x"}, {{"k", Attribute::of_int(3)}}),
                     .inputs = {floats({3, 7})},
                     .opset = opset});
  cases.push_back({.name = "TopK_opset10_k_input",
                   .node = topk({"x", "k"}, {{"axis", Attribute::of_int(0)}}),
                   .inputs = {floats({5, 4}), testing::int64s({2})},
                   .opset = 10});
  for (DType dtype : kDtypes)
    for (int64_t largest : {1, 0})
      for (int64_t sorted : {1, 0})
        for (int64_t axis : {-1, 1}) {
          if (dtype != DType::Float32 && (!sorted || axis != -1)) continue;
          cases.push_back({.name = "TopK_" + type_name(dtype) + "_largest" +
                                   std::to_string(largest) + "_sorted" + std::to_string(sorted) +
                                   "_axis" + (axis < 0 ? "m1" : std::to_string(axis)),
                           .node = topk({"x", "k"}, {{"axis", Attribute::of_int(axis)},
                                                     {"largest", Attribute::of_int(largest)},
                                                     {"sorted", Attribute::of_int(sorted)}}),
                           .inputs = {typed(floats({2, 6, 5}), dtype), testing::int64s({3})},
                           .opset = 17});
        }
}

void add_cumsum_cases(std::vector<OpCase>& cases) {
  for (DType dtype : {DType::Float32, DType::Float64, DType::Int32, DType::Int64})
    for (int64_t exclusive : {0, 1})
      for (int64_t reverse : {0, 1})
        for (int64_t axis : {1, -3}) {
          if (dtype != DType::Float32 && axis != 1) continue;
          cases.push_back({.name = "CumSum_" + type_name(dtype) + "_exclusive" +
                                   std::to_string(exclusive) + "_reverse" +
                                   std::to_string(reverse) + "_axis" +
                                   (axis < 0 ? "m" + std::to_string(-axis) : std::to_string(axis)),
                           .node = node_with("CumSum", {"x", "axis"},
                                             {{"exclusive", Attribute::of_int(exclusive)},
                                              {"reverse", Attribute::of_int(reverse)}}),
                           .inputs = {typed(floats({3, 4, 5}), dtype), fixed({}, {axis})},
                           .opset = 14});
        }
  // The axis as int32, at CumSum's first opset.
  cases.push_back({.name = "CumSum_opset11_int32_axis",
                   .node = node_with("CumSum", {"x", "axis"}),
                   .inputs = {floats({4, 6}), {.shape = {}, .dtype = DType::Int32, .values = {0}}},
                   .opset = 11});
}

void add_trilu_cases(std::vector<OpCase>& cases) {
  for (DType dtype : {DType::Float32, DType::Float64, DType::Int64})
    for (int64_t upper : {1, 0})
      for (const std::vector<int64_t>& k : std::vector<std::vector<int64_t>>{{}, {2}, {-1}, {-9}}) {
        if (dtype != DType::Float32 && k.size() == 1 && k[0] == -9) continue;
        OpCase c{.name = "Trilu_" + type_name(dtype) + (upper ? "_upper" : "_lower"),
                 .node = node_with("Trilu", {"x"}, {{"upper", Attribute::of_int(upper)}}),
                 .inputs = {typed(floats({2, 4, 5}), dtype)},
                 .opset = 14};
        if (!k.empty()) {
          c.name += "_k" + (k[0] < 0 ? "m" + std::to_string(-k[0]) : std::to_string(k[0]));
          c.node.inputs.push_back("k");
          c.inputs.push_back(fixed({}, k));
        }
        cases.push_back(std::move(c));
      }
  // A tall matrix, and a single one (rank 2).
  for (const Shape& x : std::vector<Shape>{{6, 3}, {4, 4}})
    cases.push_back({.name = "Trilu_" + dims_name(x),
                     .node = node_with("Trilu", {"x"}),
                     .inputs = {floats(x)},
                     .opset = 14});
}

DPRUN_OP_CASES_WITH_HOST_ONLY(IndexOps, {}, kHostOnlyOps, add_gather_elements_cases,
                              add_gather_nd_cases, add_scatter_nd_cases, add_topk_cases,
                              add_cumsum_cases, add_trilu_cases);

}  // namespace
}  // namespace dprun
