// The CUDA kernels of Constant, Clip, Pad, Range and PRelu, each compared with the CPU kernel on
// the same inputs (one-node models on cuda:0 and cpu:0): every Constant attribute form, Clip's
// attribute and input bounds (fed, constant, one side only, crossed), Pad's modes and argument
// forms per element size, Range per dtype, PRelu's broadcasts. Without a GPU the table is still
// checked against the registry, and the bundled models are planned with every node on cuda.
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "engine/plan.h"
#include "loader/onnx_loader.h"
#include "op_cases/op_cases.h"
#include "op_test_util.h"

namespace dprun {
namespace {

const std::set<std::string> kCoveredOps = {"Constant", "Clip", "Pad", "Range", "PRelu"};

using testing::constant_int64s;
using testing::dims_name;
using testing::floats;
using testing::InputSpec;
using testing::int64s;
using testing::node_with;
using testing::OpCase;
using testing::scalar;

std::string name_of(DType dt) {
  return std::string(dtype_name(dt));
}
/// Random data of `dtype` in [lo, hi].
InputSpec data(Shape shape, DType dtype = DType::Float32, double lo = -50, double hi = 50) {
  return {.shape = std::move(shape), .dtype = dtype, .lo = lo, .hi = hi};
}

void add_constant_cases(std::vector<OpCase>& cases) {
  auto add = [&](const std::string& name, std::string attr, Attribute a, int64_t opset) {
    cases.push_back({.name = "Constant_" + name,
                     .node = node_with("Constant", {}, {{std::move(attr), std::move(a)}}),
                     .inputs = {},
                     .opset = opset});
  };
  // A value tensor per element size (bool beside uint8), a scalar and an empty one.
  for (DType dt : {DType::Bool, DType::UInt8, DType::Int16, DType::Float32, DType::Int32,
                   DType::Int64, DType::Float64}) {
    Tensor t = testing::make_inputs({.inputs = {data({2, 3}, dt)}}, 7)[0];
    add("value_" + name_of(dt), "value", Attribute::of_tensor(t), 13);
  }
  add("value_scalar", "value", Attribute::of_tensor(Tensor::scalar<float>(2.5f)), 1);
  add("value_empty", "value",
      Attribute::of_tensor(Tensor::from_vector<int64_t>({0}, std::vector<int64_t>{})), 9);
  add("value_float", "value_float", Attribute::of_float(-1.25f), 12);
  add("value_floats", "value_floats",
      {.kind = Attribute::Kind::Floats, .floats = {1.0f, -2.5f, 3.75f}}, 12);
  add("value_int", "value_int", Attribute::of_int(-7), 13);
  add("value_ints", "value_ints", Attribute::of_ints({4, -5, 6, 1LL << 40}), 19);
}

void add_clip_cases(std::vector<OpCase>& cases) {
  auto attrs = [](std::optional<float> lo, std::optional<float> hi) {
    std::map<std::string, Attribute> a;
    if (lo) a["min"] = Attribute::of_float(*lo);
    if (hi) a["max"] = Attribute::of_float(*hi);
    return a;
  };
  // Opsets 1-10: float attributes (absent ones are unbounded).
  cases.push_back({.name = "Clip_attrs_opset6",
                   .node = node_with("Clip", {"x"}, attrs(-1.0f, 1.5f)),
                   .inputs = {floats({3, 257})},
                   .opset = 6});
  cases.push_back({.name = "Clip_attr_min_only_opset1",
                   .node = node_with("Clip", {"x"}, attrs(0.0f, std::nullopt)),
                   .inputs = {data({4, 5}, DType::Float64)},
                   .opset = 1});
  cases.push_back({.name = "Clip_attr_max_only_opset6",
                   .node = node_with("Clip", {"x"}, attrs(std::nullopt, 6.0f)),
                   .inputs = {data({4, 5})},
                   .opset = 6});
  // Opset 11+: bounds as inputs, fed or constant, of the input's dtype.
  for (DType dt : {DType::Float32, DType::Float64, DType::Int8, DType::Int16, DType::Int32,
                   DType::Int64, DType::UInt8, DType::UInt16, DType::UInt32, DType::UInt64}) {
    const bool is_unsigned =
        dt == DType::UInt8 || dt == DType::UInt16 || dt == DType::UInt32 || dt == DType::UInt64;
    const double lo = is_unsigned ? 10 : -20, hi = 30;
    const double x_lo = is_unsigned ? 0 : -50;
    cases.push_back({.name = "Clip_inputs_" + name_of(dt),
                     .node = node_with("Clip", {"x", "lo", "hi"}),
                     .inputs = {data({3, 5, 7}, dt, x_lo, 50), scalar(dt, lo), scalar(dt, hi)},
                     .opset = 13});
    cases.push_back(
        {.name = "Clip_constant_bounds_" + name_of(dt),
         .node = node_with("Clip", {"x", "lo", "hi"}),
         .inputs = {data({3, 5, 7}, dt, x_lo, 50), scalar(dt, lo, true), scalar(dt, hi, true)},
         .opset = 13});
  }
  cases.push_back({.name = "Clip_min_only_opset11",
                   .node = node_with("Clip", {"x", "lo"}),
                   .inputs = {data({6, 7}), scalar(DType::Float32, 0.0, true)},
                   .opset = 11});
  cases.push_back({.name = "Clip_max_only",
                   .node = node_with("Clip", {"x", "", "hi"}),
                   .inputs = {data({6, 7}, DType::Int32), scalar(DType::Int32, 6)},
                   .opset = 13});
  cases.push_back({.name = "Clip_no_bounds",
                   .node = node_with("Clip", {"x"}),
                   .inputs = {data({6, 7})},
                   .opset = 13});
  cases.push_back({.name = "Clip_min_above_max",
                   .node = node_with("Clip", {"x", "lo", "hi"}),
                   .inputs = {data({6, 7}), scalar(DType::Float32, 5), scalar(DType::Float32, -5)},
                   .opset = 13});
  // ReLU6 as torchvision exports it: 0-d Constant bounds, a 4-D input.
  cases.push_back({.name = "Clip_relu6_4d",
                   .node = node_with("Clip", {"x", "lo", "hi"}),
                   .inputs = {data({2, 8, 9, 9}, DType::Float32, -10, 10),
                              scalar(DType::Float32, 0, true), scalar(DType::Float32, 6, true)},
                   .opset = 13});
}

void add_pad_cases(std::vector<OpCase>& cases) {
  const std::vector<std::string> modes = {"constant", "reflect", "edge", "wrap"};
  auto mode_attr = [](const std::string& mode) {
    return std::map<std::string, Attribute>{{"mode", Attribute::of_string(mode)}};
  };
  // Opset 19: pads as a fed input, every mode, per element size.
  for (const std::string& mode : modes) {
    for (DType dt : {DType::Bool, DType::UInt8, DType::Int16, DType::Float32, DType::Int32,
                     DType::Int64, DType::Float64}) {
      cases.push_back({.name = "Pad_" + mode + "_" + name_of(dt),
                       .node = node_with("Pad", {"x", "pads"}, mode_attr(mode)),
                       .inputs = {data({2, 3, 4}, dt), int64s({0, 2, 1, 1, 1, 3})},
                       .opset = 19});
    }
    // Constant pads, pads that crop, pads longer than the dimension, 1-D and 4-D inputs.
    cases.push_back({.name = "Pad_" + mode + "_constant_pads_4d",
                     .node = node_with("Pad", {"x", "pads"}, mode_attr(mode)),
                     .inputs = {data({2, 3, 5, 5}), constant_int64s({0, 0, 1, 2, 0, 0, 2, 1})},
                     .opset = 19});
    cases.push_back({.name = "Pad_" + mode + "_crop",
                     .node = node_with("Pad", {"x", "pads"}, mode_attr(mode)),
                     .inputs = {data({4, 6}), int64s({-1, 2, 1, -3})},
                     .opset = 19});
    cases.push_back({.name = "Pad_" + mode + "_wider_than_dim",
                     .node = node_with("Pad", {"x", "pads"}, mode_attr(mode)),
                     .inputs = {data({3, 2}), int64s({5, 0, 4, 7})},
                     .opset = 19});
    cases.push_back({.name = "Pad_" + mode + "_1d",
                     .node = node_with("Pad", {"x", "pads"}, mode_attr(mode)),
                     .inputs = {data({1000}), int64s({3, 300})},
                     .opset = 19});
    // Opset 18: axes (a negative one) select the padded dims.
    cases.push_back({.name = "Pad_" + mode + "_axes",
                     .node = node_with("Pad", {"x", "pads", "", "axes"}, mode_attr(mode)),
                     .inputs = {data({2, 3, 4}), int64s({1, 2, 2, 1}), constant_int64s({-1, 1})},
                     .opset = 18});
  }
  // Opset 11: constant_value, fed and constant, of the input's dtype.
  cases.push_back({.name = "Pad_constant_value",
                   .node = node_with("Pad", {"x", "pads", "v"}),
                   .inputs = {data({3, 4}), int64s({1, 1, 2, 2}), scalar(DType::Float32, 7.5)},
                   .opset = 11});
  cases.push_back({.name = "Pad_constant_value_int64_constant",
                   .node = node_with("Pad", {"x", "pads", "v"}),
                   .inputs = {data({3, 4}, DType::Int64), constant_int64s({1, 1, 2, 2}),
                              scalar(DType::Int64, -9, true)},
                   .opset = 13});
  // Opsets 2-10: pads and value as attributes; opset 1: `paddings`.
  cases.push_back({.name = "Pad_attrs_opset2",
                   .node = node_with("Pad", {"x"},
                                     {{"pads", Attribute::of_ints({1, 0, 2, 3})},
                                      {"value", Attribute::of_float(-3.0f)}}),
                   .inputs = {data({3, 4})},
                   .opset = 2});
  cases.push_back({.name = "Pad_reflect_attrs_opset2",
                   .node = node_with("Pad", {"x"},
                                     {{"pads", Attribute::of_ints({0, 0, 1, 1, 0, 0, 1, 1})},
                                      {"mode", Attribute::of_string("reflect")}}),
                   .inputs = {data({1, 2, 4, 4})},
                   .opset = 2});
  cases.push_back({.name = "Pad_paddings_opset1",
                   .node = node_with("Pad", {"x"},
                                     {{"paddings", Attribute::of_ints({2, 1, 0, 1})},
                                      {"mode", Attribute::of_string("edge")}}),
                   .inputs = {data({3, 4})},
                   .opset = 1});
  // An empty dimension pads with the constant.
  cases.push_back({.name = "Pad_constant_empty_dim",
                   .node = node_with("Pad", {"x", "pads"}),
                   .inputs = {data({0, 3}), int64s({1, 0, 1, 0})},
                   .opset = 13});
}

void add_range_cases(std::vector<OpCase>& cases) {
  auto add = [&](const std::string& name, DType dt, double start, double limit, double delta,
                 bool constant) {
    cases.push_back({.name = "Range_" + name,
                     .node = node_with("Range", {"start", "limit", "delta"}),
                     .inputs = {scalar(dt, start, constant), scalar(dt, limit, constant),
                                scalar(dt, delta, constant)},
                     .opset = 11});
  };
  for (DType dt : {DType::Float32, DType::Float64, DType::Int16, DType::Int32, DType::Int64}) {
    add(name_of(dt), dt, -3, 1000, 2, false);
    add(name_of(dt) + "_constant", dt, 10, -5, -3, true);
    add(name_of(dt) + "_empty", dt, 5, 1, 1, false);
  }
  add("float_fraction", DType::Float32, 0.5, 7.25, 0.3, false);
}

void add_prelu_cases(std::vector<OpCase>& cases) {
  auto add = [&](const std::string& name, DType dt, Shape x, Shape slope, int64_t opset,
                 bool constant = false) {
    InputSpec s = data(std::move(slope), dt, -3, 3);
    s.constant = constant;
    cases.push_back({.name = "PRelu_" + name,
                     .node = node_with("PRelu", {"x", "slope"}),
                     .inputs = {data(std::move(x), dt), s},
                     .opset = opset});
  };
  for (DType dt :
       {DType::Float32, DType::Float64, DType::Int8, DType::Int16, DType::Int32, DType::Int64})
    add("channel_" + name_of(dt), dt, {2, 3, 4, 4}, {3, 1, 1}, 16);
  add("same_shape", DType::Float32, {2, 3, 4}, {2, 3, 4}, 16);
  add("one_element", DType::Float32, {2, 3, 4}, {1}, 9, true);
  add("trailing", DType::Float32, {257, 129}, {129}, 16);
  // Before opset 7 a 1-D slope of the channel count applies per channel.
  add("legacy_per_channel", DType::Float32, {2, 3, 4}, {3}, 6);
}

DPRUN_OP_CASES(ClipPadRange, kCoveredOps, add_constant_cases, add_clip_cases, add_pad_cases,
               add_range_cases, add_prelu_cases);

}  // namespace
}  // namespace dprun
