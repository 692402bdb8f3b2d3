// The cuDNN-backed CUDA kernels of MaxPool, AveragePool, GlobalMaxPool and GlobalAveragePool
// (float32, float16 and bfloat16) and MaxPool with Indices (max_pool_indices.cu): their cases,
// each run on a device and on the CPU on the same random inputs (op_cases.h). The geometry cases
// aim at both of each kernel's paths: cuDNN's own symmetric padding, and the explicit padding used
// for asymmetric pads, SAME_* with odd totals and ceil_mode. The attribute combinations declined
// so that their nodes run on the host (cuDNN's pooling dilations, 4-D windows) are checked in
// tests/unit/cuda_declines_test.cpp.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "op_cases/op_cases.h"

namespace dprun {
namespace {

/// The ops whose CUDA kernels this file covers.
const std::set<std::string> kCoveredOps = {"MaxPool", "AveragePool", "GlobalMaxPool",
                                           "GlobalAveragePool"};

using testing::floats;
using testing::node_with;
using testing::OpCase;

using Attrs = std::map<std::string, Attribute>;

Attribute ints(std::vector<int64_t> v) {
  return Attribute::of_ints(std::move(v));
}

// MaxPool naming its Indices output (max_pool_indices.cu). Whole values in [-2, 2] tie often,
// so both devices must pick the same (the first) maximum of each window.
struct IndicesCase {
  std::string name;
  Shape x;
  Attrs attrs;
  DType dtype = DType::Float32;
  std::vector<std::string> outputs = {"y", "indices"};
};

OpCase indices_case(const IndicesCase& c) {
  Node node = node_with("MaxPool", {"x"}, c.attrs);
  node.outputs = c.outputs;
  const double lo = c.dtype == DType::UInt8 ? 0 : -2;
  return {.name = "MaxPool_indices_" + c.name,
          .node = std::move(node),
          .inputs = {{.shape = c.x, .dtype = c.dtype, .lo = lo, .hi = lo + 4, .whole = true}}};
}

void add_pool_cases(std::vector<OpCase>& cases) {
  struct PoolCase {
    std::string name;
    Shape x;
    Attrs attrs;
  };
  const std::vector<PoolCase> table = {
      {"2d_k3_s2", {2, 3, 9, 8}, {{"kernel_shape", ints({3, 3})}, {"strides", ints({2, 2})}}},
      {"2d_pads", {2, 3, 8, 8}, {{"kernel_shape", ints({3, 3})}, {"pads", ints({1, 1, 1, 1})}}},
      {"2d_pads_strides",
       {1, 2, 9, 10},
       {{"kernel_shape", ints({3, 2})}, {"strides", ints({2, 2})}, {"pads", ints({1, 1, 1, 1})}}},
      {"2d_asymmetric_pads",
       {1, 2, 7, 8},
       {{"kernel_shape", ints({3, 3})}, {"pads", ints({0, 2, 1, 0})}, {"strides", ints({2, 1})}}},
      {"2d_ceil_mode",
       {2, 3, 8, 9},
       {{"kernel_shape", ints({3, 3})},
        {"strides", ints({2, 2})},
        {"ceil_mode", Attribute::of_int(1)}}},
      {"2d_ceil_mode_pads",
       {1, 3, 7, 7},
       {{"kernel_shape", ints({2, 2})},
        {"strides", ints({2, 2})},
        {"pads", ints({1, 1, 1, 1})},
        {"ceil_mode", Attribute::of_int(1)}}},
      {"2d_same_upper",
       {1, 2, 8, 7},
       {{"kernel_shape", ints({3, 2})},
        {"strides", ints({2, 2})},
        {"auto_pad", Attribute::of_string("SAME_UPPER")}}},
      {"2d_same_lower",
       {1, 2, 8, 7},
       {{"kernel_shape", ints({3, 2})},
        {"strides", ints({2, 2})},
        {"auto_pad", Attribute::of_string("SAME_LOWER")}}},
      {"2d_valid",
       {1, 2, 8, 7},
       {{"kernel_shape", ints({2, 2})}, {"auto_pad", Attribute::of_string("VALID")}}},
      {"1d",
       {2, 3, 10},
       {{"kernel_shape", ints({3})}, {"strides", ints({2})}, {"pads", ints({1, 1})}}},
      {"1d_ceil_mode",
       {2, 3, 11},
       {{"kernel_shape", ints({4})}, {"strides", ints({3})}, {"ceil_mode", Attribute::of_int(1)}}},
      {"3d",
       {1, 2, 5, 6, 4},
       {{"kernel_shape", ints({2, 3, 2})}, {"pads", ints({1, 1, 0, 1, 1, 0})}}},
      {"3d_ceil_asymmetric",
       {1, 2, 5, 6, 4},
       {{"kernel_shape", ints({2, 2, 2})},
        {"strides", ints({2, 2, 2})},
        {"pads", ints({0, 1, 0, 1, 0, 0})},
        {"ceil_mode", Attribute::of_int(1)}}},
  };
  for (const PoolCase& c : table) {
    cases.push_back({.name = "MaxPool_" + c.name,
                     .node = node_with("MaxPool", {"x"}, c.attrs),
                     .inputs = {floats(c.x)}});
    cases.push_back(indices_case({.name = c.name, .x = c.x, .attrs = c.attrs}));
    for (int include : {0, 1}) {
      Attrs attrs = c.attrs;
      attrs["count_include_pad"] = Attribute::of_int(include);
      cases.push_back({.name = "AveragePool_" + c.name + (include ? "_include_pad" : ""),
                       .node = node_with("AveragePool", {"x"}, attrs),
                       .inputs = {floats(c.x)}});
    }
  }
  // Opset 8 MaxPool (no ceil_mode or dilations yet) and opset 7 AveragePool.
  cases.push_back({.name = "MaxPool_opset8",
                   .node = node_with("MaxPool", {"x"}, {{"kernel_shape", ints({2, 2})}}),
                   .inputs = {floats({1, 2, 6, 6})},
                   .opset = 8});
  cases.push_back({.name = "AveragePool_opset7",
                   .node = node_with("AveragePool", {"x"}, {{"kernel_shape", ints({2, 2})}}),
                   .inputs = {floats({1, 2, 6, 6})},
                   .opset = 7});
  // MaxPool naming its Indices output (max_pool_indices.cu): every geometry above, and these.
  const Attrs k3s2p1 = {
      {"kernel_shape", ints({3, 3})}, {"strides", ints({2, 2})}, {"pads", ints({1, 1, 1, 1})}};
  const std::vector<IndicesCase> indices_table = {
      {"2d_k3_s1", {2, 3, 7, 8}, {{"kernel_shape", ints({3, 3})}}},
      {"2d_k3_s2_pads", {2, 3, 9, 8}, k3s2p1},
      {"2d_dilations",
       {1, 2, 9, 10},
       {{"kernel_shape", ints({2, 3})}, {"dilations", ints({2, 2})}, {"pads", ints({1, 2, 1, 0})}}},
      // Pads as wide as the window: the corner windows hold no element of X.
      {"2d_window_in_padding",
       {1, 2, 5, 5},
       {{"kernel_shape", ints({2, 2})}, {"pads", ints({2, 2, 2, 2})}}},
      {"2d_storage_order1",
       {2, 2, 6, 7},
       {{"kernel_shape", ints({2, 3})},
        {"strides", ints({2, 1})},
        {"storage_order", Attribute::of_int(1)}}},
      {"3d_dilations_storage_order1",
       {1, 2, 5, 6, 5},
       {{"kernel_shape", ints({2, 2, 2})},
        {"dilations", ints({2, 1, 2})},
        {"storage_order", Attribute::of_int(1)}}},
      {"float64", {2, 3, 9, 8}, k3s2p1, DType::Float64},
      {"int8", {2, 3, 9, 8}, k3s2p1, DType::Int8},
      {"uint8", {2, 3, 9, 8}, k3s2p1, DType::UInt8},
      // 16-bit: the pooling of a mixed-precision training graph; a window in the padding
      // gives -infinity, as the CPU's float32 lowest narrowed.
      {"float16", {2, 3, 9, 8}, k3s2p1, DType::Float16},
      {"bfloat16_window_in_padding",
       {1, 2, 5, 5},
       {{"kernel_shape", ints({2, 2})}, {"pads", ints({2, 2, 2, 2})}},
       DType::BFloat16},
      {"indices_only", {2, 3, 9, 8}, k3s2p1, DType::Float32, {"", "indices"}},
      {"many_blocks", {4, 16, 64, 64}, k3s2p1},  // 65536 outputs
  };
  for (const IndicesCase& c : indices_table) cases.push_back(indices_case(c));
  for (const std::string op : {"GlobalMaxPool", "GlobalAveragePool"})
    for (const Shape& x : {Shape{2, 3, 5, 6}, Shape{2, 3, 7}, Shape{1, 2, 3, 4, 5}})
      cases.push_back({.name = op + "_" + testing::dims_name(x),
                       .node = node_with(op, {"x"}),
                       .inputs = {floats(x)}});
  // float16 and bfloat16: MaxPool and AveragePool on cuDNN's own padding and on the explicit
  // padding (whose -FLT_MAX border is -infinity in float16; averages scaled to ONNX's count in
  // float32, then rounded), and the global poolings.
  for (DType dtype : {DType::Float16, DType::BFloat16}) {
    std::string suffix = "_";
    suffix += dtype_name(dtype);
    for (const PoolCase& c : {table[1], table[3], table[4]}) {
      cases.push_back({.name = "MaxPool_" + c.name + suffix,
                       .node = node_with("MaxPool", {"x"}, c.attrs),
                       .inputs = {floats(c.x)}});
      cases.back().inputs[0].dtype = dtype;
      for (int include : {0, 1}) {
        Attrs attrs = c.attrs;
        attrs["count_include_pad"] = Attribute::of_int(include);
        cases.push_back({.name = "AveragePool_" + c.name + (include ? "_include_pad" : "") + suffix,
                         .node = node_with("AveragePool", {"x"}, attrs),
                         .inputs = {floats(c.x)}});
        cases.back().inputs[0].dtype = dtype;
      }
    }
    for (const std::string op : {"GlobalMaxPool", "GlobalAveragePool"}) {
      cases.push_back({.name = op + "_2x3x5x6" + suffix,
                       .node = node_with(op, {"x"}),
                       .inputs = {floats({2, 3, 5, 6})}});
      cases.back().inputs[0].dtype = dtype;
    }
  }
}

DPRUN_OP_CASES(Pool, kCoveredOps, add_pool_cases);

}  // namespace
}  // namespace dprun
