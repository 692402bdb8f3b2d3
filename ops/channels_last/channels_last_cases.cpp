// The CPU's channels-last ops (rewrite domain; engine/backends/cpu/layout_rewrite.h and
// channels_last_fusion.h), which have oneDNN or direct fast paths and no CUDA kernel: ConvNHWC,
// MaxPoolNHWC, AveragePoolNHWC, GlobalAveragePoolNHWC, BatchNormalizationNHWC, ConvAddNHWC,
// ConcatConvNHWC, ConvChainNHWC and NchwConvMaxPoolNHWC. Float32 (the fast paths), with
// groups, strides, pads, dilations and fused activations, and float64 or a broadcast addend,
// which run the plain op's reference kernel between transposes. A GPU's plan never holds them
// (only the CPU backend rewrites to them); on sim:0 a one-node model runs them on the host, so
// the cases check the copies around a host fallback. Input 0 and the output are NHWC.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "engine/rewrites/rewrite_domain.h"
#include "op_cases/op_cases.h"

namespace dprun {
namespace {

using testing::floats;
using testing::InputSpec;
using testing::of;
using testing::OpCase;
using Attributes = std::map<std::string, Attribute>;

const std::set<std::string> kHostOnlyOps = {"ConvNHWC",
                                            "MaxPoolNHWC",
                                            "AveragePoolNHWC",
                                            "GlobalAveragePoolNHWC",
                                            "BatchNormalizationNHWC",
                                            "ConvAddNHWC",
                                            "ConcatConvNHWC",
                                            "ConvChainNHWC",
                                            "NchwConvMaxPoolNHWC"};

Attribute ints(std::vector<int64_t> v) {
  return Attribute::of_ints(std::move(v));
}

/// A node of the rewrite domain; the ai.onnx opset its plain op is read at is the case's.
OpCase rewrite_case(const std::string& name, const std::string& op, std::vector<std::string> inputs,
                    std::vector<InputSpec> specs, Attributes attributes) {
  Node n = testing::node_with(op, std::move(inputs), std::move(attributes));
  n.domain = kRewriteDomain;
  return {.name = name, .node = n, .inputs = std::move(specs), .opset = 17};
}

/// The fused activations (activation_min/max for Clip), and none.
const std::vector<std::pair<std::string, Attributes>>& activations() {
  static const std::vector<std::pair<std::string, Attributes>> list = {
      {"", {}},
      {"_relu", {{"activation", Attribute::of_string("Relu")}}},
      {"_clip",
       {{"activation", Attribute::of_string("Clip")},
        {"activation_min", Attribute::of_float(-0.5f)},
        {"activation_max", Attribute::of_float(1.0f)}}},
      {"_sigmoid", {{"activation", Attribute::of_string("Sigmoid")}}},
      {"_swish", {{"activation", Attribute::of_string("Swish")}}},
      {"_gelu", {{"activation", Attribute::of_string("Gelu")}}},
  };
  return list;
}

Attributes with(Attributes a, const Attributes& more) {
  a.insert(more.begin(), more.end());
  return a;
}

void add_conv_cases(std::vector<OpCase>& cases) {
  struct Conv {
    std::string what;
    Shape x, w;
    Attributes attributes;
  };
  const std::vector<Conv> convs = {
      {"3x3", {2, 6, 5, 4}, {6, 4, 3, 3}, {}},
      {"pads_strides",
       {2, 7, 6, 4},
       {6, 4, 3, 2},
       {{"pads", ints({1, 0, 1, 1})}, {"strides", ints({2, 1})}}},
      {"groups",
       {2, 6, 5, 4},
       {6, 2, 3, 3},
       {{"group", Attribute::of_int(2)}, {"pads", ints({1, 1, 1, 1})}}},
      {"depthwise", {1, 6, 6, 4}, {4, 1, 3, 3}, {{"group", Attribute::of_int(4)}}},
      {"dilations", {1, 8, 7, 3}, {5, 3, 2, 2}, {{"dilations", ints({2, 2})}}},
      {"pointwise", {2, 5, 5, 8}, {4, 8, 1, 1}, {}},
  };
  for (const Conv& c : convs)
    for (DType dtype : {DType::Float32, DType::Float64})
      for (bool bias : {true, false}) {
        if (dtype == DType::Float64 && !bias) continue;
        std::vector<std::string> inputs = {"x", "w"};
        std::vector<InputSpec> specs = {of(floats(c.x), dtype), of(floats(c.w, -1, 1), dtype)};
        if (bias) {
          inputs.push_back("b");
          specs.push_back(of(floats({c.w[0]}), dtype));
        }
        cases.push_back(rewrite_case(
            "ConvNHWC_" + c.what + "_" + std::string(dtype_name(dtype)) + (bias ? "" : "_no_bias"),
            "ConvNHWC", inputs, specs, c.attributes));
      }
  for (const auto& [suffix, activation] : activations()) {
    if (suffix.empty()) continue;
    cases.push_back(rewrite_case("ConvNHWC_3x3_float32" + suffix, "ConvNHWC", {"x", "w", "b"},
                                 {floats({2, 6, 5, 4}), floats({6, 4, 3, 3}, -1, 1), floats({6})},
                                 activation));
  }
}

void add_pool_cases(std::vector<OpCase>& cases) {
  struct Pool {
    std::string what;
    Attributes attributes;
  };
  const std::vector<Pool> pools = {
      {"3x3", {{"kernel_shape", ints({3, 3})}}},
      {"strides_pads",
       {{"kernel_shape", ints({3, 2})}, {"strides", ints({2, 2})}, {"pads", ints({1, 0, 1, 1})}}},
  };
  for (const std::string op : {"MaxPoolNHWC", "AveragePoolNHWC"})
    for (const Pool& p : pools)
      for (DType dtype : {DType::Float32, DType::Float64}) {
        const std::string name = op + "_" + p.what + "_" + std::string(dtype_name(dtype));
        cases.push_back(
            rewrite_case(name, op, {"x"}, {of(floats({2, 7, 6, 3}), dtype)}, p.attributes));
      }
  cases.push_back(rewrite_case(
      "AveragePoolNHWC_count_include_pad", "AveragePoolNHWC", {"x"}, {floats({2, 7, 6, 3})},
      with(pools[1].attributes, {{"count_include_pad", Attribute::of_int(1)}})));
  for (DType dtype : {DType::Float32, DType::Float64})
    for (const Shape& x : std::vector<Shape>{{2, 5, 4, 6}, {1, 9, 9, 20}})
      cases.push_back(rewrite_case(
          "GlobalAveragePoolNHWC_" + testing::dims_name(x) + "_" + std::string(dtype_name(dtype)),
          "GlobalAveragePoolNHWC", {"x"}, {of(floats(x), dtype)}, {}));
}

void add_batch_norm_cases(std::vector<OpCase>& cases) {
  for (DType dtype : {DType::Float32, DType::Float64})
    for (const auto& [suffix, activation] : activations()) {
      if (dtype == DType::Float64 && !suffix.empty() && suffix != "_relu") continue;
      const Shape channel = {5};
      cases.push_back(rewrite_case(
          "BatchNormalizationNHWC_" + std::string(dtype_name(dtype)) + suffix,
          "BatchNormalizationNHWC", {"x", "scale", "b", "mean", "var"},
          {of(floats({2, 4, 3, 5}), dtype), of(floats(channel), dtype), of(floats(channel), dtype),
           of(floats(channel), dtype), of(floats(channel, 0.5, 2), dtype)},
          with(activation, {{"epsilon", Attribute::of_float(1e-3f)}})));
    }
}

void add_conv_add_cases(std::vector<OpCase>& cases) {
  // Two groups, a 3x2 window, strides (2, 1), asymmetric pads: x [2, 9, 8, 4] gives y
  // [2, 4, 8, 6]. The addend of the output's shape (the oneDNN sum post-op) or broadcast (the
  // convolution, the Add and the activation in turn).
  const Attributes conv = {
      {"pads", ints({0, 1, 1, 0})}, {"strides", ints({2, 1})}, {"group", Attribute::of_int(2)}};
  for (const auto& [suffix, activation] : activations())
    for (const Shape& z : std::vector<Shape>{{2, 4, 8, 6}, {1, 1, 8, 6}}) {
      const bool full = z[0] == 2;
      if (!full && !suffix.empty() && suffix != "_relu") continue;
      cases.push_back(
          rewrite_case("ConvAddNHWC" + std::string(full ? "" : "_broadcast_addend") + suffix,
                       "ConvAddNHWC", {"x", "w", "b", "z"},
                       {floats({2, 9, 8, 4}), floats({6, 2, 3, 2}, -1, 1), floats({6}), floats(z)},
                       with(conv, activation)));
    }
  cases.push_back(rewrite_case(
      "ConvAddNHWC_no_bias_float64", "ConvAddNHWC", {"x", "w", "", "z"},
      {of(floats({2, 9, 8, 4}), DType::Float64), of(floats({6, 2, 3, 2}, -1, 1), DType::Float64),
       of(floats({2, 4, 8, 6}), DType::Float64)},
      conv));
}

void add_concat_conv_cases(std::vector<OpCase>& cases) {
  // Parts of 3, 5 and 8 channels at 2 x 11 x 10; weights [4, 16, 3, 2] read them all.
  const Attributes conv = {{"pads", ints({1, 1, 0, 1})}, {"strides", ints({1, 2})}};
  for (const auto& [suffix, activation] : activations())
    for (DType dtype : {DType::Float32, DType::Float64}) {
      if (dtype == DType::Float64 && !suffix.empty()) continue;
      cases.push_back(
          rewrite_case("ConcatConvNHWC_" + std::string(dtype_name(dtype)) + suffix,
                       "ConcatConvNHWC", {"w", "b", "p0", "p1", "p2"},
                       {of(floats({4, 16, 3, 2}, -1, 1), dtype), of(floats({4}), dtype),
                        of(floats({2, 11, 10, 3}), dtype), of(floats({2, 11, 10, 5}), dtype),
                        of(floats({2, 11, 10, 8}), dtype)},
                       with(conv, activation)));
    }
}

void add_conv_chain_cases(std::vector<OpCase>& cases) {
  // An expansion (1x1, 4 to 16 channels), a depthwise 3x3 (stride 2, no bias) and a projection
  // (1x1 to 5), each step's attributes under its "<k>:" prefix; with `sum` the last adds Z.
  const Attributes chain = {
      {"steps", Attribute::of_int(3)},    {"0:activation", Attribute::of_string("Swish")},
      {"1:group", Attribute::of_int(16)}, {"1:pads", ints({1, 1, 1, 1})},
      {"1:strides", ints({2, 2})},        {"1:activation", Attribute::of_string("Relu")}};
  for (DType dtype : {DType::Float32, DType::Float64})
    for (bool sum : {false, true}) {
      std::vector<std::string> inputs = {"x", "w0", "b0", "w1", "", "w2", "b2"};
      std::vector<InputSpec> specs = {of(floats({2, 10, 9, 4}), dtype),
                                      of(floats({16, 4, 1, 1}, -1, 1), dtype),
                                      of(floats({16}), dtype),
                                      of(floats({16, 1, 3, 3}, -1, 1), dtype),
                                      of(floats({5, 16, 1, 1}, -1, 1), dtype),
                                      of(floats({5}), dtype)};
      if (sum) {
        inputs.push_back("z");
        specs.push_back(of(floats({2, 5, 5, 5}), dtype));
      }
      cases.push_back(rewrite_case(
          "ConvChainNHWC_" + std::string(dtype_name(dtype)) + (sum ? "_sum" : ""), "ConvChainNHWC",
          inputs, specs, with(chain, {{"sum", Attribute::of_int(sum ? 1 : 0)}})));
    }
}

void add_nchw_conv_max_pool_cases(std::vector<OpCase>& cases) {
  // A network's first convolution on an NCHW input of 3 channels, then a 3x3 stride-2 max pool
  // (its attributes under "pool:"); the output is NHWC.
  const Attributes stem = {{"pads", ints({1, 0, 1, 1})},
                           {"strides", ints({2, 2})},
                           {"pool:kernel_shape", ints({3, 3})},
                           {"pool:strides", ints({2, 2})}};
  for (const auto& [suffix, activation] : activations())
    for (DType dtype : {DType::Float32, DType::Float64})
      for (bool bias : {true, false}) {
        if ((dtype == DType::Float64 || !bias) && !suffix.empty()) continue;
        std::vector<std::string> inputs = {"x", "w"};
        std::vector<InputSpec> specs = {of(floats({2, 3, 17, 16}), dtype),
                                        of(floats({8, 3, 3, 3}, -1, 1), dtype)};
        if (bias) {
          inputs.push_back("b");
          specs.push_back(of(floats({8}), dtype));
        }
        cases.push_back(rewrite_case("NchwConvMaxPoolNHWC_" + std::string(dtype_name(dtype)) +
                                         (bias ? "" : "_no_bias") + suffix,
                                     "NchwConvMaxPoolNHWC", inputs, specs, with(stem, activation)));
      }
}

DPRUN_OP_CASES_WITH_HOST_ONLY(ChannelsLast, {}, kHostOnlyOps, add_conv_cases, add_pool_cases,
                              add_batch_norm_cases, add_conv_add_cases, add_concat_conv_cases,
                              add_conv_chain_cases, add_nchw_conv_max_pool_cases);

}  // namespace
}  // namespace dprun
