// The CUDA SoftmaxCrossEntropyLoss and NegativeLogLikelihoodLoss kernels compared with the CPU
// kernels on the same random inputs: one-node models run on cuda:0 and on cpu:0. Cases cover
// [N, C] and [N, C, d1, d2] scores, each reduction, with and without weights, an ignore_index
// that some labels hit (one case where every label does: "mean" is 0 / 0), the log_prob output,
// float32 and float64 scores, int64 and int32 labels, and sizes beyond one block. Labels are
// random integers in [0, C - 1], or in [ignore_index, C - 1] when ignore_index is -1. Without a
// GPU the table is still checked against the registry and run on the CPU.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "op_cases/op_cases.h"
#include "op_test_util.h"

namespace dprun {
namespace {

/// The ops whose CUDA kernels this file covers.
const std::set<std::string> kCoveredOps = {"SoftmaxCrossEntropyLoss", "NegativeLogLikelihoodLoss"};

using testing::dims_name;
using testing::InputSpec;
using testing::OpCase;

/// One SoftmaxCrossEntropyLoss case.
struct LossCase {
  Shape scores;
  std::string reduction = "mean";
  bool weights = false;
  std::optional<int64_t> ignore_index;
  bool log_prob = false;
  DType dtype = DType::Float32;
  DType label_dtype = DType::Int64;
  int64_t opset = 13;
  /// Labels from lo to C - 1 (lo < 0 reaches a negative ignore_index); hi overrides C - 1.
  int64_t lo = 0;
  std::optional<int64_t> hi;
  bool constant_labels = false;  // an initializer: the CUDA kernel checks it on the host
  std::string op = "SoftmaxCrossEntropyLoss";  // or NegativeLogLikelihoodLoss (no log_prob)
};

OpCase loss_case(const LossCase& l) {
  const int64_t c = l.scores[1];
  Shape label_shape = {l.scores[0]};
  label_shape.insert(label_shape.end(), l.scores.begin() + 2, l.scores.end());
  std::string name = l.op + "_" + dims_name(l.scores) + "_" + l.reduction;
  if (l.weights) name += "_weights";
  if (l.ignore_index)
    name += "_ignore" + std::string(*l.ignore_index < 0 ? "m" : "") +
            std::to_string(std::abs(*l.ignore_index));
  if (l.hi) name += "_all_ignored";
  if (l.log_prob) name += "_log_prob";
  if (l.constant_labels) name += "_constant_labels";
  // Appended piece by piece: g++ 12 at -O3 warns (-Wrestrict) on the one-expression form.
  for (const std::string& part :
       {std::string(dtype_name(l.dtype)), std::string(dtype_name(l.label_dtype)),
        "opset" + std::to_string(l.opset)})
    name += "_" + part;
  std::vector<std::string> inputs = {"scores", "labels"};
  if (l.weights) inputs.push_back("weights");
  Node node = testing::make_node(
      l.op, inputs,
      l.log_prob ? std::vector<std::string>{"y", "log_prob"} : std::vector<std::string>{"y"});
  node.attributes = {{"reduction", Attribute::of_string(l.reduction)}};
  if (l.ignore_index) node.attributes["ignore_index"] = Attribute::of_int(*l.ignore_index);
  std::vector<InputSpec> specs = {{.shape = l.scores, .dtype = l.dtype, .lo = -3, .hi = 3},
                                  {.shape = label_shape,
                                   .dtype = l.label_dtype,
                                   .lo = static_cast<double>(l.lo),
                                   .hi = static_cast<double>(l.hi.value_or(c - 1)),
                                   .constant = l.constant_labels}};
  // Positive weights keep the "mean" divisor away from 0.
  if (l.weights) specs.push_back({.shape = {c}, .dtype = l.dtype, .lo = 0.5, .hi = 2});
  return {.name = name, .node = node, .inputs = specs, .opset = l.opset};
}

void add_cases(std::vector<OpCase>& cases) {
  std::vector<LossCase> table;
  // [N, C] with short rows (a thread per row), [N, C] with long rows (a block per row) and
  // [N, C, d1, d2] (a thread per column): every reduction, with and without weights and an
  // ignore_index; dtypes, label dtypes and log_prob vary along the table.
  const std::vector<Shape> shapes = {{16, 10}, {6, 50}, {2, 5, 3, 4}};
  for (const Shape& s : shapes)
    for (const std::string reduction : {"none", "sum", "mean"})
      for (int weights = 0; weights < 2; ++weights)
        for (int ignore = 0; ignore < 2; ++ignore) {
          const auto k = table.size();
          LossCase l{.scores = s, .reduction = reduction, .weights = weights != 0};
          if (ignore) l.ignore_index = -1, l.lo = -1;
          l.log_prob = k % 3 != 1;
          l.dtype = k % 2 ? DType::Float64 : DType::Float32;
          l.label_dtype = k % 4 < 2 ? DType::Int64 : DType::Int32;
          table.push_back(l);
        }
  // An ignore_index inside [0, C), and opset 12; constant labels.
  for (const std::string reduction : {"none", "mean"})
    table.push_back({.scores = {16, 10},
                     .reduction = reduction,
                     .weights = true,
                     .ignore_index = 3,
                     .log_prob = true,
                     .opset = 12});
  table.push_back({.scores = {2, 5, 3, 4}, .ignore_index = 3, .constant_labels = true});
  // Every label ignored: "mean" divides 0 by 0 (NaN on both devices).
  for (const std::string reduction : {"sum", "mean"})
    table.push_back(
        {.scores = {4, 5, 3}, .reduction = reduction, .ignore_index = -1, .lo = -1, .hi = -1});
  // Beyond one block: N * D = 3000 positions of C = 1000 classes, as rows and as columns.
  for (const Shape& s : {Shape{3000, 1000}, Shape{3, 1000, 1000}})
    for (const std::string reduction : {"none", "mean"})
      for (DType dtype : {DType::Float32, DType::Float64})
        table.push_back({.scores = s,
                         .reduction = reduction,
                         .weights = true,
                         .ignore_index = -1,
                         .log_prob = reduction == "mean",
                         .dtype = dtype,
                         .label_dtype = dtype == DType::Float32 ? DType::Int64 : DType::Int32,
                         .lo = -1});
  // NegativeLogLikelihoodLoss: the same kernel on log-probabilities as given.
  for (const Shape& s : {Shape{16, 10}, Shape{2, 5, 3, 4}})
    for (const std::string reduction : {"none", "sum", "mean"})
      table.push_back({.scores = s,
                       .reduction = reduction,
                       .weights = reduction != "sum",
                       .ignore_index = -1,
                       .dtype = reduction == "sum" ? DType::Float64 : DType::Float32,
                       .label_dtype = reduction == "none" ? DType::Int32 : DType::Int64,
                       .lo = -1,
                       .op = "NegativeLogLikelihoodLoss"});
  for (const LossCase& l : table) cases.push_back(loss_case(l));
}

DPRUN_OP_CASES(Loss, kCoveredOps, add_cases);

}  // namespace
}  // namespace dprun
