// The normalization family (ops/normalization/), each case run on a device and on the CPU on the
// same random inputs (op_cases.h). With CUDA kernels: BatchNormalization (inference on cuDNN, in
// float16 and bfloat16 in batch_norm_16bit.cu; training mode in batch_norm_training.cu, with each
// opset's statistics outputs), LRN (cuDNN), the fused gradient node BatchNormTrainingGrad
// (engine/rewrites/op_fusion.h: the shapes of the CPU's tests, a channel of more values than a
// block has threads, an empty batch) and LayerNormalization (the last axis and an earlier one, a
// Scale broadcast on the device, rows wider than a block; with and without B and the statistics
// outputs; float64, float16 and bfloat16); the attribute combinations declined so that their
// nodes run on the host are checked in tests/unit/cuda_declines_test.cpp. Without a CUDA kernel,
// for their gradient rules or CPU fast paths: InstanceNormalization (and its oneDNN path),
// GroupNormalization (per-group and per-channel scale) and LpNormalization. A GPU's plan runs
// those on the host: on sim:0 their cases check the copies around a host fallback, and finite
// differences check their gradient rules (from opset 7, where the rules' nodes broadcast
// numpy-style).
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "engine/rewrites/rewrite_domain.h"
#include "op_cases/op_cases.h"
#include "op_test_util.h"

namespace dprun {
namespace {

using testing::dims_name;
using testing::floats;
using testing::InputSpec;
using testing::node_with;
using testing::of;
using testing::OpCase;

using Attrs = std::map<std::string, Attribute>;

/// The ops whose CUDA kernels this file covers.
const std::set<std::string> kCoveredOps = {"BatchNormalization", "LRN", "BatchNormTrainingGrad",
                                           "LayerNormalization"};
/// The ops without a CUDA kernel it covers.
const std::set<std::string> kHostOnlyOps = {"InstanceNormalization", "GroupNormalization",
                                            "LpNormalization"};

void add_batch_norm_cases(std::vector<OpCase>& cases) {
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
}

void add_lrn_cases(std::vector<OpCase>& cases) {
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

// The fused gradient node BatchNormTrainingGrad (the rewrite domain's).
void add_batch_norm_training_grad_cases(std::vector<OpCase>& cases) {
  for (const Shape& x : std::vector<Shape>{
           {4, 3, 5, 6}, {6, 4}, {3, 2, 7}, {2, 3, 2, 3, 4}, {2, 2, 1500}, {0, 3, 4, 4}}) {
    Node n = node_with("BatchNormTrainingGrad", {"x", "dy", "scale"});
    n.domain = kRewriteDomain;
    n.outputs = {"dx", "dscale", "db"};
    n.attributes["epsilon"] = Attribute::of_float(1e-3f);
    cases.push_back({.name = "BatchNormTrainingGrad_" + dims_name(x),
                     .node = std::move(n),
                     .inputs = {floats(x), floats(x), floats({x[1]}, 0.5, 2.0)},
                     .opset = 1});
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

void add_instance_norm_cases(std::vector<OpCase>& cases) {
  for (DType dtype : {DType::Float32, DType::Float64})
    for (const Shape& x : std::vector<Shape>{{2, 3, 4, 5}, {2, 3, 7}, {1, 2, 40, 40}}) {
      const Shape channel = {x[1]};
      cases.push_back(
          {.name = "InstanceNormalization_" + std::string(dtype_name(dtype)) + "_" + dims_name(x),
           .node = node_with("InstanceNormalization", {"x", "scale", "b"},
                             {{"epsilon", Attribute::of_float(1e-3f)}}),
           .inputs = {of(floats(x, -1, 3), dtype), of(floats(channel, 0.5, 2), dtype),
                      of(floats(channel), dtype)},
           .opset = 17});
    }
}

void add_group_norm_cases(std::vector<OpCase>& cases) {
  // Scale and bias of num_groups elements (opset 18's form) or of C (21's); both are taken at
  // either opset.
  for (int64_t opset : {18, 21})
    for (int64_t groups : {1, 2, 6})
      for (bool per_channel : {false, true}) {
        if (groups == 6 && per_channel) continue;  // C = 6: the same shape
        const Shape x = {2, 6, 3, 3}, param = {per_channel ? 6 : groups};
        cases.push_back({.name = "GroupNormalization_opset" + std::to_string(opset) + "_groups" +
                                 std::to_string(groups) + (per_channel ? "_per_channel" : ""),
                         .node = node_with("GroupNormalization", {"x", "scale", "b"},
                                           {{"num_groups", Attribute::of_int(groups)},
                                            {"epsilon", Attribute::of_float(1e-3f)}}),
                         .inputs = {floats(x, -1, 3), floats(param, 0.5, 2), floats(param)},
                         .opset = opset});
      }
}

void add_lp_norm_cases(std::vector<OpCase>& cases) {
  for (int64_t p : {1, 2})
    for (int64_t axis : {-1, 0, 1})
      for (DType dtype : {DType::Float32, DType::Float64})
        cases.push_back(
            {.name = "LpNormalization_p" + std::to_string(p) + "_axis" +
                     (axis < 0 ? "m1" : std::to_string(axis)) + "_" +
                     std::string(dtype_name(dtype)),
             .node = node_with("LpNormalization", {"x"},
                               {{"p", Attribute::of_int(p)}, {"axis", Attribute::of_int(axis)}}),
             // Away from 0, where |x| has its kink.
             .inputs = {of(floats({3, 4, 5}, 0.2, 2), dtype)},
             .opset = 17});
}

DPRUN_OP_CASES_WITH_HOST_ONLY(Normalization, kCoveredOps, kHostOnlyOps, add_batch_norm_cases,
                              add_lrn_cases, add_batch_norm_training_grad_cases,
                              add_layer_norm_cases, add_instance_norm_cases, add_group_norm_cases,
                              add_lp_norm_cases);

}  // namespace
}  // namespace dprun
