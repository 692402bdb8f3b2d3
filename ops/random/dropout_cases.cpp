// Dropout (ops/random/), which has no CUDA kernel but a gradient rule: inference (before opset 12
// always, the ratio an attribute; from 12 without training_mode, or with it false) and training
// with a seed, which fixes the mask, in float32 and float64. A GPU's plan runs it on the host: on
// sim:0 the cases check the copies around a host fallback, and finite differences check the rule
// (from opset 7, where the rule's nodes broadcast numpy-style).
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "op_cases/op_cases.h"

namespace dprun {
namespace {

using testing::floats;
using testing::InputSpec;
using testing::node_with;
using testing::of;
using testing::OpCase;

const std::set<std::string> kHostOnlyOps = {"Dropout"};

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

DPRUN_OP_CASES_WITH_HOST_ONLY(Dropout, {}, kHostOnlyOps, add_dropout_cases);

}  // namespace
}  // namespace dprun
