// The cuDNN-backed CUDA kernels (Conv, ConvTranspose, MaxPool, AveragePool, GlobalMaxPool,
// GlobalAveragePool, BatchNormalization, LRN; Conv, ConvTranspose, the poolings and
// BatchNormalization in float16 and bfloat16 too), BatchNormalization's training-mode kernel
// (batch_norm_training.cu) and MaxPool with Indices (max_pool_indices.cu): their cases, each run
// on a device and on the CPU on the same random inputs (op_cases.h). The geometry cases aim at
// both of each kernel's paths: cuDNN's own symmetric padding, and the explicit padding (or
// cropping) used for asymmetric pads, SAME_* with odd totals, ceil_mode and output_shape. The
// attribute combinations declined so that their nodes run on the host are checked in
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
const std::set<std::string> kCoveredOps = {"Conv",
                                           "ConvTranspose",
                                           "MaxPool",
                                           "AveragePool",
                                           "GlobalMaxPool",
                                           "GlobalAveragePool",
                                           "BatchNormalization",
                                           "LRN"};

using testing::floats;
using testing::node_with;
using testing::OpCase;

using Attrs = std::map<std::string, Attribute>;

Attribute ints(std::vector<int64_t> v) {
  return Attribute::of_ints(std::move(v));
}

void add_conv_cases(std::vector<OpCase>& cases) {
  struct ConvCase {
    std::string name;
    Shape x, w;
    Attrs attrs;
  };
  const std::vector<ConvCase> table = {
      {"1d_pads", {2, 3, 11}, {4, 3, 3}, {{"pads", ints({1, 1})}}},
      {"1d_stride_dilation",
       {2, 3, 13},
       {4, 3, 3},
       {{"strides", ints({2})}, {"dilations", ints({2})}}},
      {"2d_plain", {2, 3, 9, 8}, {5, 3, 3, 3}, {}},
      {"2d_kernel_shape_pads",
       {2, 3, 9, 8},
       {5, 3, 3, 2},
       {{"kernel_shape", ints({3, 2})}, {"pads", ints({1, 1, 1, 1})}}},
      {"2d_strides_asymmetric_pads",
       {2, 3, 9, 8},
       {4, 3, 3, 3},
       {{"strides", ints({2, 2})}, {"pads", ints({1, 2, 0, 1})}}},
      {"2d_dilations",
       {1, 3, 10, 9},
       {4, 3, 3, 3},
       {{"dilations", ints({2, 2})}, {"pads", ints({2, 2, 2, 2})}}},
      {"2d_groups", {1, 4, 7, 7}, {6, 2, 3, 3}, {{"group", Attribute::of_int(2)}}},
      {"2d_depthwise",
       {2, 6, 8, 8},
       {6, 1, 3, 3},
       {{"group", Attribute::of_int(6)}, {"pads", ints({1, 1, 1, 1})}}},
      // in 9 gives an even total padding, 8 an odd one (asymmetric).
      {"2d_same_upper",
       {2, 3, 9, 8},
       {4, 3, 3, 3},
       {{"auto_pad", Attribute::of_string("SAME_UPPER")}, {"strides", ints({2, 2})}}},
      {"2d_same_lower",
       {2, 3, 9, 8},
       {4, 3, 3, 3},
       {{"auto_pad", Attribute::of_string("SAME_LOWER")}, {"strides", ints({2, 2})}}},
      {"2d_same_upper_stride1_even_kernel",
       {1, 2, 6, 6},
       {3, 2, 2, 2},
       {{"auto_pad", Attribute::of_string("SAME_UPPER")}}},
      {"2d_valid",
       {2, 3, 9, 8},
       {4, 3, 3, 3},
       {{"auto_pad", Attribute::of_string("VALID")}, {"strides", ints({2, 3})}}},
      {"3d_pads", {1, 2, 5, 6, 4}, {3, 2, 3, 3, 2}, {{"pads", ints({1, 1, 0, 1, 1, 0})}}},
      {"3d_strides_asymmetric",
       {1, 2, 6, 5, 5},
       {2, 2, 2, 3, 3},
       {{"strides", ints({2, 1, 2})}, {"pads", ints({0, 1, 1, 1, 0, 2})}}},
  };
  for (const ConvCase& c : table)
    for (bool bias : {false, true}) {
      OpCase cc{.name = "Conv_" + c.name + (bias ? "_bias" : ""),
                .node = node_with("Conv",
                                  bias ? std::vector<std::string>{"x", "w", "b"}
                                       : std::vector<std::string>{"x", "w"},
                                  c.attrs),
                .inputs = {floats(c.x), floats(c.w)}};
      if (bias) cc.inputs.push_back(floats({c.w[0]}));
      cases.push_back(std::move(cc));
    }
  // float16 and bfloat16: cuDNN's own padding, the explicit padding of asymmetric pads, a 1-D
  // window and groups, each with a bias (added to the rounded product on the GPU).
  for (DType dtype : {DType::Float16, DType::BFloat16})
    for (const ConvCase& c : {table[0], table[2], table[4], table[6]}) {
      OpCase cc{.name = "Conv_" + c.name + "_bias_" + std::string(dtype_name(dtype)),
                .node = node_with("Conv", {"x", "w", "b"}, c.attrs),
                .inputs = {floats(c.x), floats(c.w), floats({c.w[0]})}};
      for (testing::InputSpec& input : cc.inputs) input.dtype = dtype;
      cases.push_back(std::move(cc));
    }
}

void add_conv_transpose_cases(std::vector<OpCase>& cases) {
  struct ConvTransposeCase {
    std::string name;
    Shape x, w;
    Attrs attrs;
  };
  const std::vector<ConvTransposeCase> table = {
      {"2d_strides", {1, 3, 4, 5}, {3, 2, 3, 3}, {{"strides", ints({2, 2})}}},
      {"2d_pads", {2, 3, 4, 5}, {3, 2, 3, 3}, {{"pads", ints({1, 1, 1, 1})}}},
      {"2d_asymmetric_pads",
       {1, 3, 4, 5},
       {3, 2, 3, 3},
       {{"strides", ints({2, 2})}, {"pads", ints({0, 1, 2, 0})}}},
      {"2d_output_padding",
       {1, 3, 4, 5},
       {3, 2, 3, 3},
       {{"strides", ints({2, 2})}, {"pads", ints({1, 1, 1, 1})}, {"output_padding", ints({1, 1})}}},
      // output_padding below the dilation but not the stride: more rows than cuDNN derives.
      {"2d_output_padding_dilated",
       {1, 2, 4, 4},
       {2, 2, 2, 2},
       {{"dilations", ints({2, 2})}, {"output_padding", ints({1, 0})}}},
      // Smaller than the full result: cropped unevenly.
      {"2d_output_shape_cropped",
       {1, 3, 4, 5},
       {3, 2, 3, 3},
       {{"strides", ints({2, 2})}, {"output_shape", ints({8, 10})}}},
      // Larger than the full result: zeros (plus bias) at the end.
      {"2d_output_shape_extended",
       {1, 3, 4, 5},
       {3, 2, 3, 3},
       {{"strides", ints({2, 2})}, {"output_shape", ints({1, 2, 10, 12})}}},
      {"2d_same_upper",
       {1, 3, 4, 5},
       {3, 2, 3, 3},
       {{"strides", ints({2, 2})}, {"auto_pad", Attribute::of_string("SAME_UPPER")}}},
      {"2d_same_lower",
       {1, 3, 4, 5},
       {3, 2, 3, 3},
       {{"strides", ints({2, 2})}, {"auto_pad", Attribute::of_string("SAME_LOWER")}}},
      {"2d_groups",
       {1, 4, 5, 5},
       {4, 3, 3, 3},
       {{"group", Attribute::of_int(2)}, {"strides", ints({2, 1})}}},
      {"2d_dilations",
       {1, 2, 5, 4},
       {2, 3, 3, 2},
       {{"dilations", ints({2, 2})}, {"pads", ints({1, 1, 1, 1})}}},
      {"1d_strides", {2, 3, 7}, {3, 2, 3}, {{"strides", ints({3})}}},
      {"3d_strides", {1, 2, 3, 4, 3}, {2, 2, 2, 3, 2}, {{"strides", ints({2, 1, 2})}}},
  };
  // B has one value per output channel: W's dim 1 per group.
  auto bias_of = [](const ConvTransposeCase& c) {
    int64_t group = 1;
    if (auto it = c.attrs.find("group"); it != c.attrs.end()) group = it->second.i;
    return floats({c.w[1] * group});
  };
  for (const ConvTransposeCase& c : table)
    for (bool bias : {false, true}) {
      OpCase cc{.name = "ConvTranspose_" + c.name + (bias ? "_bias" : ""),
                .node = node_with("ConvTranspose",
                                  bias ? std::vector<std::string>{"x", "w", "b"}
                                       : std::vector<std::string>{"x", "w"},
                                  c.attrs),
                .inputs = {floats(c.x), floats(c.w)}};
      if (bias) cc.inputs.push_back(bias_of(c));
      cases.push_back(std::move(cc));
    }
  // float16 and bfloat16 (the data gradient of a 16-bit Conv in training): cuDNN's own crop,
  // the uncropped result copied out (asymmetric pads, output_shape larger than the result),
  // groups and a 1-D window, each with a bias.
  for (DType dtype : {DType::Float16, DType::BFloat16})
    for (const ConvTransposeCase& c : {table[1], table[2], table[6], table[9], table[11]}) {
      OpCase cc{.name = "ConvTranspose_" + c.name + "_bias_" + std::string(dtype_name(dtype)),
                .node = node_with("ConvTranspose", {"x", "w", "b"}, c.attrs),
                .inputs = {floats(c.x), floats(c.w), bias_of(c)}};
      for (testing::InputSpec& input : cc.inputs) input.dtype = dtype;
      cases.push_back(std::move(cc));
    }
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

void add_norm_cases(std::vector<OpCase>& cases) {
  struct BnCase {
    std::string name;
    Shape x;
    int64_t opset;
    Attrs attrs;
  };
  const std::vector<BnCase> table = {
      {"4d", {2, 3, 4, 5}, 15, {}},
      {"epsilon", {2, 3, 4, 5}, 15, {{"epsilon", Attribute::of_float(1e-3f)}}},
      {"2d", {6, 4}, 15, {}},
      {"3d", {2, 5, 7}, 14, {}},
      {"5d", {2, 3, 2, 3, 4}, 9, {}},
      {"opset7", {2, 3, 4, 4}, 7, {}},
  };
  for (const BnCase& c : table) {
    const int64_t ch = c.x[1];
    cases.push_back(
        {.name = "BatchNormalization_" + c.name,
         .node = node_with("BatchNormalization", {"x", "scale", "b", "mean", "var"}, c.attrs),
         .inputs = {floats(c.x), floats({ch}), floats({ch}), floats({ch}), floats({ch}, 0.1, 2.0)},
         .opset = c.opset});
  }
  // float16 and bfloat16 (batch_norm_16bit.cu): X and all four parameters of one 16-bit type.
  for (DType dtype : {DType::Float16, DType::BFloat16})
    for (const BnCase& c : {table[0], table[1], table[4]}) {
      const int64_t ch = c.x[1];
      std::string name = "BatchNormalization_" + c.name + "_";
      name += dtype_name(dtype);
      OpCase cc{
          .name = name,
          .node = node_with("BatchNormalization", {"x", "scale", "b", "mean", "var"}, c.attrs),
          .inputs = {floats(c.x), floats({ch}), floats({ch}), floats({ch}), floats({ch}, 0.1, 2.0)},
          .opset = c.opset};
      for (testing::InputSpec& input : cc.inputs) input.dtype = dtype;
      cases.push_back(std::move(cc));
    }
  // Training mode (batch_norm_training.cu): batch statistics, and the statistics outputs of
  // each opset; before opset 14 the extra outputs are what selects training.
  struct BnTrainingCase {
    std::string name;
    Shape x;
    int64_t opset;
    std::vector<std::string> outputs;
    DType dtype = DType::Float32, stats_dtype = DType::Float32;  // X, scale, B; mean, var
  };
  const std::vector<std::string> running = {"y", "running_mean", "running_var"};
  const std::vector<BnTrainingCase> training = {
      {"y_only", {2, 3, 4, 5}, 15, {"y"}},
      {"4d", {2, 3, 4, 5}, 15, running},
      {"2d", {6, 4}, 15, running},
      {"3d", {2, 5, 7}, 14, running},
      {"over_one_block", {8, 3, 64, 64}, 15, running},
      {"opset9", {2, 3, 4, 4}, 9, {"y", "mean", "var", "saved_mean", "saved_var"}},
      {"opset7_mean_var", {3, 2, 5}, 7, {"y", "mean", "var"}},
      {"float64", {2, 3, 4, 5}, 15, running, DType::Float64, DType::Float64},
      {"float64_stats", {2, 3, 4, 5}, 15, running, DType::Float32, DType::Float64},
  };
  for (const BnTrainingCase& c : training) {
    Attrs attrs;
    if (c.opset >= 14) attrs["training_mode"] = Attribute::of_int(1);
    if (c.name != "y_only") {
      attrs["momentum"] = Attribute::of_float(0.8f);
      attrs["epsilon"] = Attribute::of_float(1e-3f);
    }
    Node node = node_with("BatchNormalization", {"x", "scale", "b", "mean", "var"}, attrs);
    node.outputs = c.outputs;
    const int64_t ch = c.x[1];
    std::vector<testing::InputSpec> inputs = {floats(c.x), floats({ch}), floats({ch}), floats({ch}),
                                              floats({ch}, 0.1, 2.0)};
    for (size_t i = 0; i < inputs.size(); ++i) inputs[i].dtype = i < 3 ? c.dtype : c.stats_dtype;
    cases.push_back({.name = "BatchNormalization_training_" + c.name,
                     .node = std::move(node),
                     .inputs = std::move(inputs),
                     .opset = c.opset});
  }
  for (int64_t size : {3, 5}) {
    const std::string s = std::to_string(size);
    cases.push_back({.name = "LRN_size" + s,
                     .node = node_with("LRN", {"x"}, {{"size", Attribute::of_int(size)}}),
                     .inputs = {floats({2, 7, 4, 5})}});
    cases.push_back({.name = "LRN_size" + s + "_attributes",
                     .node = node_with("LRN", {"x"},
                                       {{"size", Attribute::of_int(size)},
                                        {"alpha", Attribute::of_float(0.02f)},
                                        {"beta", Attribute::of_float(0.6f)},
                                        {"bias", Attribute::of_float(2.f)}}),
                     .inputs = {floats({2, 6, 3, 2, 2})}});
  }
  cases.push_back(
      {.name = "LRN_size4_3d",
       .node = node_with("LRN", {"x"},
                         {{"size", Attribute::of_int(4)}, {"alpha", Attribute::of_float(0.1f)}}),
       .inputs = {floats({2, 9, 5})}});
}

DPRUN_OP_CASES(ConvPoolNorm, kCoveredOps, add_conv_cases, add_conv_transpose_cases, add_pool_cases,
               add_norm_cases);

}  // namespace
}  // namespace dprun
