// The CUDA kernel of ScatterElements and Scatter (ops/array/scatter_elements.cu) compared with
// the CPU kernel on the same inputs: every reduction at the opsets that name it, axes 0, 1 and
// -1 on rank-2 and rank-3 data, float16 and bfloat16 among the dtypes, negative indices, and
// small index ranges so that duplicates make the order of accumulation matter. Cases with short
// lines or many of them take the kernel's one-thread-per-line way; those with few lines longer than
// 16 updates take its sorted way. Without a GPU the table is still checked against the registry.
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "op_cases/op_cases.h"

namespace dprun {
namespace {

const std::set<std::string> kCoveredOps = {"ScatterElements", "Scatter"};

using testing::InputSpec;
using testing::node_with;
using testing::OpCase;

/// Random data (and updates) of `dtype` in [lo, hi].
InputSpec data(Shape shape, DType dtype = DType::Float32, double lo = -50, double hi = 50) {
  return {.shape = std::move(shape), .dtype = dtype, .lo = lo, .hi = hi};
}
/// Random indices in [-dim, dim): negatives included, duplicates when the shape is larger.
InputSpec indices(Shape shape, int64_t dim, DType dtype = DType::Int64) {
  return {.shape = std::move(shape),
          .dtype = dtype,
          .lo = static_cast<double>(-dim),
          .hi = static_cast<double>(dim - 1)};
}

/// A ScatterElements (or Scatter) case: updates are random like `x`, shaped like `i`.
OpCase scatter_case(const std::string& name, const std::string& op, int64_t opset, int64_t axis,
                    const std::string& reduction, InputSpec x, InputSpec i) {
  std::map<std::string, Attribute> attrs = {{"axis", Attribute::of_int(axis)}};
  if (!reduction.empty()) attrs["reduction"] = Attribute::of_string(reduction);
  InputSpec u = x;
  u.shape = i.shape;
  return {.name = op + "_" + name,
          .node = node_with(op, {"x", "i", "u"}, attrs),
          .inputs = {std::move(x), std::move(i), std::move(u)},
          .opset = opset};
}

void add_cases(std::vector<OpCase>& cases) {
  auto add = [&](const std::string& name, int64_t opset, int64_t axis, const std::string& reduction,
                 InputSpec x, InputSpec i) {
    cases.push_back(
        scatter_case(name, "ScatterElements", opset, axis, reduction, std::move(x), std::move(i)));
  };
  // Scatter, ScatterElements' name at opsets 9 and 10.
  cases.push_back(
      scatter_case("opset9_axis0", "Scatter", 9, 0, "", data({4, 5}), indices({3, 5}, 4)));
  cases.push_back(scatter_case("opset10_axis_m1_3d", "Scatter", 10, -1, "", data({2, 3, 5}),
                               indices({2, 2, 4}, 5)));
  // Reduction "none": the last update in row-major order wins among duplicates.
  add("opset11_axis0", 11, 0, "", data({4, 5}), indices({6, 3}, 4));
  add("opset11_axis1", 11, 1, "", data({4, 5}), indices({3, 7}, 5));
  add("opset13_axis_m1", 13, -1, "", data({4, 5}), indices({4, 3}, 5, DType::Int32));
  add("axis0_3d", 13, 0, "", data({3, 4, 5}), indices({5, 4, 2}, 3));
  add("axis1_3d_int32", 13, 1, "", data({3, 4, 5}), indices({2, 6, 5}, 4, DType::Int32));
  add("axis_m1_3d", 13, -1, "", data({3, 4, 5}), indices({3, 4, 9}, 5));
  add("constant_indices", 13, 1, "", data({3, 4}),
      {.shape = {2, 3}, .dtype = DType::Int64, .values = {0, -1, 3, -4, 2, 2}, .constant = true});
  add("empty_indices", 13, 0, "", data({3, 4}), indices({0, 4}, 3));
  add("float64", 13, 0, "", data({4, 5}, DType::Float64), indices({6, 5}, 4));
  add("int64", 13, 1, "", data({4, 5}, DType::Int64), indices({4, 7}, 5));
  add("uint8", 13, 0, "", data({4, 5}, DType::UInt8, 0, 255), indices({6, 5}, 4));
  add("bool", 13, -1, "", data({4, 5}, DType::Bool), indices({4, 6}, 5));
  add("float16", 13, 0, "", data({4, 5}, DType::Float16), indices({6, 5}, 4));
  add("int16_3d", 18, 2, "none", data({2, 3, 4}, DType::Int16), indices({2, 3, 6}, 4));
  // Reductions: add and mul from opset 16, max and min from 18.
  for (int64_t opset : {16, 18}) {
    const std::string at = "_opset" + std::to_string(opset);
    for (const std::string r : {"add", "mul", "max", "min"}) {
      if (opset == 16 && (r == "max" || r == "min")) continue;
      add(r + at + "_axis0", opset, 0, r, data({4, 5}, DType::Float32, -2, 2), indices({6, 5}, 4));
      add(r + at + "_axis1", opset, 1, r, data({4, 5}, DType::Float32, -2, 2), indices({3, 8}, 5));
      add(r + at + "_axis_m1_3d", opset, -1, r, data({2, 3, 4}, DType::Float32, -2, 2),
          indices({2, 2, 7}, 4));
      add(r + at + "_axis0_3d", opset, 0, r, data({3, 2, 4}, DType::Float32, -2, 2),
          indices({6, 2, 3}, 3));
      // Lines of 24 updates, 8 of them: the sorted way.
      add(r + at + "_sorted_axis1_3d", opset, 1, r, data({3, 5, 4}, DType::Float32, -2, 2),
          indices({2, 24, 4}, 5));
      add(r + at + "_float64", opset, 1, r, data({4, 5}, DType::Float64, -2, 2),
          indices({4, 9}, 5));
      add(r + at + "_int64", opset, 0, r, data({4, 5}, DType::Int64, -3, 3), indices({7, 5}, 4));
      add(r + at + "_int64_sorted", opset, 0, r, data({3, 5}, DType::Int64, -3, 3),
          indices({20, 5}, 3));
    }
  }
  add("max_int32", 18, 1, "max", data({4, 5}, DType::Int32), indices({4, 6}, 5, DType::Int32));
  add("min_uint8_3d", 18, -1, "min", data({2, 3, 4}, DType::UInt8, 0, 255), indices({2, 3, 5}, 4));
  // 16-bit reductions, each update rounded as on the CPU: both ways, and an embedding's
  // gradient (add into many short lines).
  for (DType dt : {DType::Float16, DType::BFloat16}) {
    const std::string name(dtype_name(dt));
    add("add_" + name, 18, 0, "add", data({4, 5}, dt, -2, 2), indices({6, 5}, 4));
    add("max_" + name + "_3d", 18, -1, "max", data({2, 3, 4}, dt, -2, 2), indices({2, 2, 7}, 4));
    add("add_" + name + "_sorted", 18, 1, "add", data({3, 5, 4}, dt, -2, 2),
        indices({2, 24, 4}, 5));
    add("add_" + name + "_lines_blocks", 18, 0, "add", data({50, 8}, dt, -2, 2),
        indices({700, 8}, 50));
  }
  add("add_int8_wraps", 18, 0, "add", data({3, 4}, DType::Int8, -128, 127), indices({9, 4}, 3));
  add("add_bool", 18, 1, "add", data({3, 4}, DType::Bool), indices({3, 6}, 4));
  add("mul_bool_sorted", 18, 0, "mul", data({3, 4}, DType::Bool), indices({30, 4}, 3));
  // Several blocks: MaxPool's gradient (one line of a flattened tensor, sorted), an embedding's
  // (many short lines), and "none" over many short lines.
  add("add_flat_blocks", 18, 0, "add", data({1000}, DType::Float32, -2, 2), indices({3000}, 1000));
  add("add_lines_blocks", 18, 1, "add", data({700, 8}, DType::Float32, -2, 2),
      indices({700, 6}, 8));
  add("none_flat_blocks_int32", 13, 0, "", data({600}), indices({2000}, 600, DType::Int32));
  add("none_lines_blocks", 13, 0, "", data({4, 900}), indices({5, 900}, 4));
}

DPRUN_OP_CASES(Scatter, kCoveredOps, add_cases);

}  // namespace
}  // namespace dprun
