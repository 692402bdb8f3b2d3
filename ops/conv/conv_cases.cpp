// The cuDNN-backed CUDA kernels of Conv and ConvTranspose (float32, float16 and bfloat16): their
// cases, each run on a device and on the CPU on the same random inputs (op_cases.h). The geometry
// cases aim at both of each kernel's paths: cuDNN's own symmetric padding, and the explicit
// padding (or cropping) used for asymmetric pads, SAME_* with odd totals, output_padding and
// output_shape. The attribute combinations declined so that their nodes run on the host are
// checked in tests/unit/cuda_declines_test.cpp.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "op_cases/op_cases.h"

namespace dprun {
namespace {

/// The ops whose CUDA kernels this file covers.
const std::set<std::string> kCoveredOps = {"Conv", "ConvTranspose"};

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

DPRUN_OP_CASES(Conv, kCoveredOps, add_conv_cases, add_conv_transpose_cases);

}  // namespace
}  // namespace dprun
