// Ops without a CUDA kernel that have gradient rules or CPU fast paths, of the normalization
// family: InstanceNormalization (and its oneDNN path), GroupNormalization (per-group and
// per-channel scale), LpNormalization, Dropout (inference, and training with a seed, which fixes
// the mask) and the rewrite domain's AllReduceSum (SyncBatchNorm's sum over replicas; a run on its
// own passes X through). A GPU's plan runs them on the host: on sim:0 the cases check the copies
// around a host fallback, and finite differences check their gradient rules (from opset 7,
// where the rules' nodes broadcast numpy-style).
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "engine/rewrites/rewrite_domain.h"
#include "op_cases/op_cases.h"

namespace dprun {
namespace {

using testing::dims_name;
using testing::floats;
using testing::InputSpec;
using testing::node_with;
using testing::OpCase;

const std::set<std::string> kHostOnlyOps = {"InstanceNormalization", "GroupNormalization",
                                            "LpNormalization", "Dropout", "AllReduceSum"};

InputSpec of(InputSpec spec, DType dtype) {
  spec.dtype = dtype;
  return spec;
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

void add_dropout_cases(std::vector<OpCase>& cases) {
  // The ratio is a constant: the rule gives it no gradient.
  const InputSpec ratio = testing::scalar(DType::Float32, 0.25, true);
  auto flag = [](bool on) {
    return InputSpec{.shape = {}, .dtype = DType::Bool, .values = {on ? 1 : 0}};
  };
  auto dropout = [](std::vector<std::string> inputs, bool mask) {
    Node n = node_with("Dropout", std::move(inputs), {{"seed", Attribute::of_int(7)}});
    if (mask) n.outputs.push_back("mask");
    return n;
  };
  // Inference: before opset 12 always (the ratio an attribute), from 12 without training_mode.
  cases.push_back({.name = "Dropout_opset10_inference_mask",
                   .node = dropout({"x"}, true),
                   .inputs = {floats({4, 6})},
                   .opset = 10});
  cases.push_back({.name = "Dropout_inference",
                   .node = dropout({"x"}, false),
                   .inputs = {floats({4, 6})},
                   .opset = 17});
  cases.push_back({.name = "Dropout_training_off_mask",
                   .node = dropout({"x", "ratio", "training"}, true),
                   .inputs = {floats({4, 6}), ratio, flag(false)},
                   .opset = 17});
  // Training: the seed fixes the mask, the same on every run (the rule reads it from output 1).
  for (DType dtype : {DType::Float32, DType::Float64})
    cases.push_back({.name = "Dropout_training_mask_" + std::string(dtype_name(dtype)),
                     .node = dropout({"x", "ratio", "training"}, true),
                     .inputs = {of(floats({4, 6}), dtype), ratio, flag(true)},
                     .opset = 17});
}

void add_all_reduce_sum_cases(std::vector<OpCase>& cases) {
  for (DType dtype : {DType::Float32, DType::Float64}) {
    Node n = node_with("AllReduceSum", {"x"});
    n.domain = kRewriteDomain;
    cases.push_back({.name = "AllReduceSum_" + std::string(dtype_name(dtype)),
                     .node = n,
                     .inputs = {of(floats({2, 3}), dtype)},
                     .opset = 1});
  }
}

DPRUN_OP_CASES_WITH_HOST_ONLY(Normalization, {}, kHostOnlyOps, add_instance_norm_cases,
                              add_group_norm_cases, add_lp_norm_cases, add_dropout_cases,
                              add_all_reduce_sum_cases);

}  // namespace
}  // namespace dprun
