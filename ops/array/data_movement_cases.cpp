// The CUDA kernels of the array family (ops/array/) that move data: Gather, Concat, Split, Slice,
// Expand, Tile, Shape, Size, ConstantOfShape, Constant, Pad, Transpose and the reshape family
// (Reshape, Flatten, Squeeze, Unsqueeze, Identity), which move bytes whatever the dtype, and
// Range, each compared with the CPU kernel on the same inputs: one-node models run on cuda:0 and
// on cpu:0. Gather to Pad have a case per element size (1, 2, 4 and 8 bytes, bool included), with
// every Constant attribute form and Pad's modes and argument forms; Transpose a case per kind of
// permutation, and one per element size; the reshape family float32 cases, Reshape, Squeeze and
// Unsqueeze with their shape or axes as an input and, at an earlier opset, as an attribute; Range
// a case per dtype. Integer arguments come as fed inputs and as constants (initializers), which
// the kernels read on the host without touching the GPU. Without a GPU the table is still
// checked against the registry.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "op_cases/op_cases.h"

namespace dprun {
namespace {

/// The ops whose CUDA kernels this file covers.
const std::set<std::string> kCoveredOps = {
    "Gather",    "Concat",  "Split",           "Slice",    "Expand",    "Tile",
    "Shape",     "Size",    "ConstantOfShape", "Constant", "Pad",       "Range",
    "Transpose", "Reshape", "Flatten",         "Squeeze",  "Unsqueeze", "Identity"};

using testing::constant_int64s;
using testing::dims_name;
using testing::floats;
using testing::InputSpec;
using testing::int64s;
using testing::node_with;
using testing::OpCase;
using testing::scalar;

/// One dtype per element size, with bool beside uint8 and both 4- and 8-byte kinds.
const std::vector<DType> kDtypes = {DType::Bool,  DType::UInt8, DType::Int16,  DType::Float32,
                                    DType::Int32, DType::Int64, DType::Float64};

std::string name_of(DType dt) {
  return std::string(dtype_name(dt));
}

/// Random data of `dtype`.
InputSpec data(Shape shape, DType dtype = DType::Float32) {
  return {.shape = std::move(shape), .dtype = dtype, .lo = -50, .hi = 50};
}
/// Random indices of `dtype` in [-dim, dim): negatives included.
InputSpec indices(Shape shape, int64_t dim, DType dtype = DType::Int64) {
  return {.shape = std::move(shape),
          .dtype = dtype,
          .lo = static_cast<double>(-dim),
          .hi = static_cast<double>(dim - 1)};
}
/// A 0-d int64 input holding `value`.
InputSpec int64_scalar(int64_t value) {
  return {.shape = {}, .dtype = DType::Int64, .values = {value}};
}
/// Names prefix0, prefix1, ... (built by appending: GCC 12 warns falsely on "x" + string).
std::vector<std::string> numbered(const std::string& prefix, size_t n) {
  std::vector<std::string> names;
  for (size_t i = 0; i < n; ++i) names.push_back(prefix + std::to_string(i));
  return names;
}
Node with_outputs(Node node, std::vector<std::string> outputs) {
  node.outputs = std::move(outputs);
  return node;
}

void add_gather_cases(std::vector<OpCase>& cases) {
  auto add = [&](const std::string& name, int64_t axis, std::vector<InputSpec> inputs,
                 int64_t opset = 17) {
    cases.push_back({.name = "Gather_" + name,
                     .node = node_with("Gather", {"x", "i"}, {{"axis", Attribute::of_int(axis)}}),
                     .inputs = std::move(inputs),
                     .opset = opset});
  };
  for (DType dt : kDtypes) add(name_of(dt), 0, {data({5, 3}, dt), indices({4}, 5)});
  add("axis0_2d_indices", 0, {data({5, 3}), indices({2, 3}, 5)});
  add("axis1", 1, {data({2, 5, 3}), indices({2, 3}, 5)});
  add("axis1_int32", 1, {data({2, 5, 3}), indices({4}, 5, DType::Int32)});
  add("axis_m1", -1, {data({2, 3, 4}), indices({3}, 4)});
  add("axis_m1_int32", -1, {data({2, 3, 4}), indices({2, 2}, 4, DType::Int32)});
  add("scalar_index", 0, {data({5, 3}), int64_scalar(-2)});
  add("scalar_index_axis1", 1, {data({2, 5, 3}), int64_scalar(4)});
  add("constant_indices", 1, {data({2, 5, 3}), constant_int64s({0, -1, 3, -5})});
  add("empty_indices", 0, {data({5, 3}), int64s({})});
  add("opset11", 0, {data({5, 3}), indices({4}, 5)}, 11);
  add("opset1", 0, {data({5, 3}), indices({4}, 5)}, 1);
}

void add_concat_cases(std::vector<OpCase>& cases) {
  auto add = [&](const std::string& name, std::optional<int64_t> axis,
                 std::vector<InputSpec> inputs, int64_t opset = 17) {
    std::map<std::string, Attribute> attrs;
    if (axis) attrs["axis"] = Attribute::of_int(*axis);
    cases.push_back({.name = "Concat_" + name,
                     .node = node_with("Concat", numbered("x", inputs.size()), attrs),
                     .inputs = std::move(inputs),
                     .opset = opset});
  };
  for (DType dt : kDtypes)
    add(name_of(dt) + "_with_empty", 1, {data({2, 3}, dt), data({2, 0}, dt), data({2, 4}, dt)});
  add("axis0", 0, {data({2, 3}), data({1, 3}), data({3, 3})});
  add("axis_m1_3d", -1, {data({2, 3, 1}), data({2, 3, 5}), data({2, 3, 2})});
  add("axis1_3d_empty_first", 1, {data({2, 0, 4}), data({2, 3, 4}), data({2, 1, 4})});
  add("all_empty", 0, {data({0, 3}), data({0, 3})});
  add("one_input", 1, {data({2, 3})});
  add("opset1_default_axis1", std::nullopt, {data({2, 3, 2}), data({2, 1, 2})}, 1);
  add("opset4", 2, {data({2, 3, 2}), data({2, 3, 1})}, 4);
  add("opset11_negative_axis", -2, {data({2, 3, 2}), data({2, 1, 2})}, 11);
}

void add_split_cases(std::vector<OpCase>& cases) {
  auto add = [&](const std::string& name, std::vector<std::string> inputs,
                 std::map<std::string, Attribute> attrs, size_t outputs,
                 std::vector<InputSpec> specs, int64_t opset) {
    cases.push_back(
        {.name = "Split_" + name,
         .node = with_outputs(node_with("Split", inputs, attrs), numbered("y", outputs)),
         .inputs = std::move(specs),
         .opset = opset});
  };
  const auto axis = [](int64_t a) { return Attribute::of_int(a); };
  for (DType dt : kDtypes)
    add(name_of(dt) + "_equal", {"x"}, {{"axis", axis(1)}}, 3, {data({2, 6}, dt)}, 17);
  add("input", {"x", "split"}, {{"axis", axis(1)}}, 3, {data({2, 6, 2}), int64s({1, 3, 2})}, 13);
  add("input_with_zero", {"x", "split"}, {{"axis", axis(-1)}}, 3, {data({2, 5}), int64s({2, 0, 3})},
      13);
  add("constant_input", {"x", "split"}, {{"axis", axis(0)}}, 2,
      {data({5, 3}), constant_int64s({4, 1})}, 13);
  add("attribute", {"x"}, {{"axis", axis(1)}, {"split", Attribute::of_ints({2, 4})}}, 2,
      {data({3, 6})}, 11);
  add("attribute_opset2", {"x"}, {{"split", Attribute::of_ints({1, 2})}}, 2, {data({3, 2})}, 2);
  add("opset1_input", {"x", "split"}, {{"axis", axis(1)}}, 2, {data({3, 5}), int64s({3, 2})}, 1);
  add("negative_axis", {"x"}, {{"axis", axis(-2)}}, 2, {data({2, 4, 3})}, 17);
  // num_outputs (opset 18): ceil-sized pieces, the last one shorter.
  add("num_outputs", {"x"}, {{"axis", axis(1)}, {"num_outputs", Attribute::of_int(3)}}, 3,
      {data({2, 7})}, 18);
  add("num_outputs_even", {"x"}, {{"num_outputs", Attribute::of_int(2)}}, 2, {data({4, 3})}, 18);
}

void add_slice_cases(std::vector<OpCase>& cases) {
  const Shape x = {4, 6, 5};
  // From opset 10: starts, ends, axes, steps as inputs ("" for an omitted one).
  auto add = [&](const std::string& name, std::vector<std::string> inputs,
                 std::vector<InputSpec> specs, int64_t opset = 13) {
    cases.push_back({.name = "Slice_" + name,
                     .node = node_with("Slice", inputs),
                     .inputs = std::move(specs),
                     .opset = opset});
  };
  const int64_t kBig = INT64_MAX, kSmall = INT64_MIN;
  for (DType dt : kDtypes)
    add(name_of(dt), {"x", "s", "e", "a"}, {data(x, dt), int64s({1}), int64s({-1}), int64s({1})});
  add("negative", {"x", "s", "e", "a"},
      {data(x), int64s({-3, -4}), int64s({-1, 5}), int64s({1, -1})});
  add("clamped", {"x", "s", "e", "a"},
      {data(x), int64s({-100, 2}), int64s({100, kBig}), int64s({0, 2})});
  add("stepped", {"x", "s", "e", "a", "st"},
      {data(x), int64s({0, 1}), int64s({6, 5}), int64s({1, 2}), int64s({2, 3})});
  add("reversed", {"x", "s", "e", "a", "st"},
      {data(x), int64s({-1}), int64s({kSmall}), int64s({1}), int64s({-1})});
  add("reversed_step2_clamped", {"x", "s", "e", "a", "st"},
      {data(x), int64s({100, 3}), int64s({-100, 0}), int64s({0, 2}), int64s({-2, -1})});
  add("step_min_int64", {"x", "s", "e", "a", "st"},
      {data(x), int64s({-1}), int64s({kSmall}), int64s({2}), int64s({kSmall})});
  add("empty_result", {"x", "s", "e", "a"}, {data(x), int64s({3}), int64s({1}), int64s({1})});
  add("default_axes", {"x", "s", "e"}, {data(x), int64s({1, 2}), int64s({3, 4})});
  add("omitted_axes_with_steps", {"x", "s", "e", "", "st"},
      {data(x), int64s({3}), int64s({0}), int64s({-1})});
  add("contiguous_rows", {"x", "s", "e", "a"}, {data(x), int64s({1}), int64s({3}), int64s({0})});
  add("constant_arguments", {"x", "s", "e", "a", "st"},
      {data(x), constant_int64s({-1, 0}), constant_int64s({0, 4}), constant_int64s({2, 0}),
       constant_int64s({-2, 3})});
  add("opset10", {"x", "s", "e", "a", "st"},
      {data(x), int64s({1}), int64s({-1}), int64s({2}), int64s({2})}, 10);
  add("opset11", {"x", "s", "e", "a"}, {data(x), int64s({-2}), int64s({kBig}), int64s({-1})}, 11);
  // Before opset 10: attributes, no steps.
  auto add_attr = [&](const std::string& name, std::map<std::string, Attribute> attrs,
                      int64_t opset) {
    cases.push_back({.name = "Slice_" + name,
                     .node = node_with("Slice", {"x"}, std::move(attrs)),
                     .inputs = {data(x)},
                     .opset = opset});
  };
  add_attr("opset1_attributes",
           {{"starts", Attribute::of_ints({1, -100})},
            {"ends", Attribute::of_ints({-1, 100})},
            {"axes", Attribute::of_ints({0, 2})}},
           1);
  add_attr("opset9_default_axes",
           {{"starts", Attribute::of_ints({0, -3})}, {"ends", Attribute::of_ints({2, kBig})}}, 9);
}

void add_expand_tile_cases(std::vector<OpCase>& cases) {
  auto expand = [&](const std::string& name, InputSpec x, InputSpec shape, int64_t opset = 13) {
    cases.push_back({.name = "Expand_" + name,
                     .node = node_with("Expand", {"x", "shape"}),
                     .inputs = {std::move(x), std::move(shape)},
                     .opset = opset});
  };
  for (DType dt : kDtypes) expand(name_of(dt), data({3, 1}, dt), int64s({2, 1, 4}));
  // x's 1 grows to the shape's 4 and the shape's 1 takes x's 3.
  expand("both_directions", data({3, 1}), int64s({2, 1, 4}));
  expand("shape_shorter", data({2, 3, 4}), int64s({3, 1}));
  expand("scalar", data({}), int64s({2, 3}));
  expand("same_shape", data({2, 3}), int64s({2, 3}));
  expand("to_zero", data({1, 3}), int64s({0, 3}));
  expand("middle", data({2, 1, 3}), int64s({2, 5, 3}));
  expand("constant_shape", data({1, 4}), constant_int64s({3, 1, 4}));
  expand("opset8", data({3, 1}), int64s({3, 2}), 8);

  auto tile = [&](const std::string& name, InputSpec x, std::vector<InputSpec> args,
                  int64_t opset = 13) {
    std::vector<InputSpec> specs = {std::move(x)};
    specs.insert(specs.end(), args.begin(), args.end());
    std::vector<std::string> inputs = {"x", "repeats"};
    if (opset < 6) inputs = {"x", "tiles", "axis"};
    cases.push_back({.name = "Tile_" + name,
                     .node = node_with("Tile", inputs),
                     .inputs = std::move(specs),
                     .opset = opset});
  };
  for (DType dt : kDtypes) tile(name_of(dt), data({2, 3}, dt), {int64s({2, 3})});
  tile("rows", data({2, 3}), {int64s({3, 1})});
  tile("3d", data({2, 3, 2}), {int64s({1, 3, 2})});
  tile("zero_repeat", data({2, 3}), {int64s({0, 2})});
  tile("ones", data({2, 3}), {int64s({1, 1})});
  tile("1d", data({4}), {int64s({3})});
  tile("constant_repeats", data({2, 1, 3}), {constant_int64s({2, 4, 1})});
  tile("opset6", data({2, 3}), {int64s({2, 2})}, 6);
  tile("opset1_tiles_axis", data({2, 3}), {int64_scalar(3), int64_scalar(1)}, 1);
  tile("opset1_negative_axis", data({2, 3}), {int64_scalar(2), int64_scalar(-2)}, 1);
}

void add_shape_cases(std::vector<OpCase>& cases) {
  auto shape = [&](const std::string& name, InputSpec x, std::map<std::string, Attribute> attrs,
                   int64_t opset) {
    cases.push_back({.name = "Shape_" + name,
                     .node = node_with("Shape", {"x"}, std::move(attrs)),
                     .inputs = {std::move(x)},
                     .opset = opset});
  };
  const auto i = [](int64_t v) { return Attribute::of_int(v); };
  for (DType dt : kDtypes) shape(name_of(dt), data({2, 3, 4}, dt), {}, 13);
  shape("opset1", data({2, 3}), {}, 1);
  shape("scalar", data({}), {}, 15);
  shape("start1", data({2, 3, 4, 5}), {{"start", i(1)}}, 15);
  shape("end_m1", data({2, 3, 4, 5}), {{"end", i(-1)}}, 15);
  shape("start_m3_end3", data({2, 3, 4, 5}), {{"start", i(-3)}, {"end", i(3)}}, 15);
  shape("clamped", data({2, 3, 4, 5}), {{"start", i(-10)}, {"end", i(10)}}, 15);
  shape("empty_range", data({2, 3, 4, 5}), {{"start", i(3)}, {"end", i(1)}}, 15);
  // More dims than one write carries (16 values a launch).
  Shape many(18, 1);
  many[0] = 2;
  many[17] = 3;
  shape("rank18", data(many), {}, 15);

  auto size = [&](const std::string& name, InputSpec x, int64_t opset) {
    cases.push_back({.name = "Size_" + name,
                     .node = node_with("Size", {"x"}),
                     .inputs = {std::move(x)},
                     .opset = opset});
  };
  for (DType dt : kDtypes) size(name_of(dt), data({2, 3, 4}, dt), 13);
  size("scalar", data({}), 13);
  size("empty", data({2, 0}), 13);
  size("opset1", data({3}), 1);

  auto constant_of_shape = [&](const std::string& name, std::optional<Tensor> value, InputSpec dims,
                               int64_t opset = 13) {
    std::map<std::string, Attribute> attrs;
    if (value) attrs["value"] = Attribute::of_tensor(*value);
    cases.push_back({.name = "ConstantOfShape_" + name,
                     .node = node_with("ConstantOfShape", {"shape"}, std::move(attrs)),
                     .inputs = {std::move(dims)},
                     .opset = opset});
  };
  constant_of_shape("default_zero", std::nullopt, int64s({2, 3}));
  constant_of_shape("bool", Tensor::from_vector<bool>({1}, {true}), int64s({3, 2}));
  constant_of_shape("uint8", Tensor::from_vector<uint8_t>({1}, {200}), int64s({5}));
  constant_of_shape("int16", Tensor::from_vector<int16_t>({1}, {-7}), int64s({2, 2}));
  constant_of_shape("float32", Tensor::from_vector<float>({1}, {1.5f}), int64s({2, 3, 4}));
  constant_of_shape("int32", Tensor::from_vector<int32_t>({1}, {-123456}), int64s({4, 1}));
  constant_of_shape("int64", Tensor::from_vector<int64_t>({1}, {int64_t{1} << 40}), int64s({3}));
  constant_of_shape("float64", Tensor::from_vector<double>({1}, {-0.25}), int64s({2, 5}));
  constant_of_shape("zero_dim", Tensor::from_vector<float>({1}, {2.0f}), int64s({2, 0}));
  constant_of_shape("empty_shape_scalar", Tensor::from_vector<float>({1}, {3.0f}), int64s({}));
  constant_of_shape("constant_shape", Tensor::from_vector<int64_t>({1}, {9}),
                    constant_int64s({3, 2}));
  constant_of_shape("opset9", std::nullopt, int64s({4}), 9);
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

void add_transpose_cases(std::vector<OpCase>& cases) {
  const std::vector<std::pair<Shape, std::vector<int64_t>>> perms = {
      {{3, 5}, {1, 0}},
      {{3, 5}, {}},  // default: reversed
      {{2, 3, 4}, {0, 2, 1}},
      {{2, 3, 4}, {2, 0, 1}},
      {{2, 3, 4}, {0, 1, 2}},  // the identity: a copy
      {{2, 3, 4, 5}, {0, 2, 1, 3}},
      {{2, 3, 4, 5}, {3, 1, 0, 2}},
      {{2, 1, 4, 5}, {1, 3, 0, 2}},  // a size-1 dim
      {{2, 3, 4, 5}, {-1, -2, 0, 1}},
  };
  for (const auto& [shape, perm] : perms) {
    std::map<std::string, Attribute> attrs;
    if (!perm.empty()) attrs["perm"] = Attribute::of_ints(perm);
    std::string perm_name = perm.empty() ? "default" : "";
    for (int64_t p : perm) {
      if (p < 0) perm_name += 'm';
      perm_name += std::to_string(std::abs(p));
    }
    cases.push_back({.name = "Transpose_" + dims_name(shape) + "_perm_" + perm_name,
                     .node = node_with("Transpose", {"x"}, attrs),
                     .inputs = {floats(shape)}});
  }
  // Other element sizes move the same way.
  for (DType dt : {DType::UInt8, DType::Int16, DType::Int64, DType::Float64})
    cases.push_back(
        {.name = "Transpose_" + std::string(dtype_name(dt)),
         .node = node_with("Transpose", {"x"}, {{"perm", Attribute::of_ints({2, 0, 1})}}),
         .inputs = {{.shape = {3, 4, 5}, .dtype = dt}}});
}

void add_reshape_cases(std::vector<OpCase>& cases) {
  const Shape x = {2, 3, 4};
  cases.push_back({.name = "Reshape_input",
                   .node = node_with("Reshape", {"x", "shape"}),
                   .inputs = {floats(x), int64s({4, 0, -1})}});
  cases.push_back({.name = "Reshape_opset4_attribute",
                   .node = node_with("Reshape", {"x"}, {{"shape", Attribute::of_ints({6, 4})}}),
                   .inputs = {floats(x)},
                   .opset = 4});
  cases.push_back({.name = "Flatten",
                   .node = node_with("Flatten", {"x"}, {{"axis", Attribute::of_int(2)}}),
                   .inputs = {floats(x)}});
  cases.push_back({.name = "Squeeze_input",
                   .node = node_with("Squeeze", {"x", "axes"}),
                   .inputs = {floats({2, 1, 3, 1}), int64s({1, -1})}});
  cases.push_back({.name = "Squeeze_opset11_attribute",
                   .node = node_with("Squeeze", {"x"}, {{"axes", Attribute::of_ints({1})}}),
                   .inputs = {floats({2, 1, 3, 1})},
                   .opset = 11});
  cases.push_back({.name = "Unsqueeze_input",
                   .node = node_with("Unsqueeze", {"x", "axes"}),
                   .inputs = {floats(x), int64s({0, 4})}});
  cases.push_back({.name = "Unsqueeze_opset11_attribute",
                   .node = node_with("Unsqueeze", {"x"}, {{"axes", Attribute::of_ints({1})}}),
                   .inputs = {floats(x)},
                   .opset = 11});
  cases.push_back(
      {.name = "Identity", .node = node_with("Identity", {"x"}), .inputs = {floats(x)}});
}

DPRUN_OP_CASES(DataMovement, kCoveredOps, add_gather_cases, add_concat_cases, add_split_cases,
               add_slice_cases, add_expand_tile_cases, add_shape_cases, add_constant_cases,
               add_pad_cases, add_range_cases, add_transpose_cases, add_reshape_cases);

}  // namespace
}  // namespace dprun
