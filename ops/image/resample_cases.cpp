// Ops without a CUDA kernel that have gradient rules, of the image family's resampling
// (ops/image/): Resize (opset 10's scales, 13's sizes with each mode, coordinate transformation
// and nearest rounding, 18's axes and antialias, 19's half_pixel_symmetric) and Upsample (scales
// as attribute before opset 9, as input at 9). A GPU's plan runs them on the host: on sim:0 the
// cases check the copies around a host fallback, and finite differences check the gradient
// rules, which need the scales or sizes constant (the sizes of the resized axes at build time),
// as the cases give them.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "op_cases/op_cases.h"

namespace dprun {
namespace {

using testing::floats;
using testing::InputSpec;
using testing::node_with;
using testing::OpCase;
using Attributes = std::map<std::string, Attribute>;

const std::set<std::string> kHostOnlyOps = {"Resize", "Upsample"};

/// Constant float32 scales (whole numbers).
InputSpec scales(std::vector<int64_t> values) {
  const auto n = static_cast<int64_t>(values.size());
  return {.shape = {n}, .values = std::move(values), .constant = true};
}

Attributes modes(const std::string& mode, const std::string& coordinates) {
  Attributes a = {{"mode", Attribute::of_string(mode)}};
  if (!coordinates.empty()) a["coordinate_transformation_mode"] = Attribute::of_string(coordinates);
  return a;
}

void add_resize_cases(std::vector<OpCase>& cases) {
  const Shape x = {1, 2, 4, 5};
  // Opset 10: X and scales only, nearest or linear.
  for (const std::string mode : {"nearest", "linear"})
    cases.push_back({.name = "Resize_opset10_" + mode,
                     .node = node_with("Resize", {"x", "scales"}, modes(mode, "")),
                     .inputs = {floats(x), scales({1, 1, 2, 3})},
                     .opset = 10});
  // Opset 13: sizes (roi and scales left out), up and down, each mode and coordinate mapping.
  struct Mode {
    std::string what;
    Attributes attributes;
  };
  const std::vector<Mode> resizes = {
      {"nearest", modes("nearest", "")},
      {"nearest_floor_asymmetric",
       [] {
         Attributes a = modes("nearest", "asymmetric");
         a["nearest_mode"] = Attribute::of_string("floor");
         return a;
       }()},
      {"nearest_ceil_align_corners",
       [] {
         Attributes a = modes("nearest", "align_corners");
         a["nearest_mode"] = Attribute::of_string("ceil");
         return a;
       }()},
      {"linear_half_pixel", modes("linear", "half_pixel")},
      {"linear_align_corners", modes("linear", "align_corners")},
      {"linear_pytorch_half_pixel", modes("linear", "pytorch_half_pixel")},
      {"cubic", modes("cubic", "")},
      {"cubic_exclude_outside",
       [] {
         Attributes a = modes("cubic", "half_pixel");
         a["exclude_outside"] = Attribute::of_int(1);
         a["cubic_coeff_a"] = Attribute::of_float(-0.5f);
         return a;
       }()},
  };
  for (const Mode& m : resizes)
    for (const std::vector<int64_t>& sizes :
         std::vector<std::vector<int64_t>>{{1, 2, 7, 9}, {1, 2, 3, 2}}) {
      const bool up = sizes[2] > x[2];
      cases.push_back({.name = "Resize_" + m.what + (up ? "_up" : "_down"),
                       .node = node_with("Resize", {"x", "", "", "sizes"}, m.attributes),
                       .inputs = {floats(x), testing::constant_int64s(sizes)},
                       .opset = 13});
    }
  // Opset 13 with constant scales; float64 and an integer X.
  for (DType dtype : {DType::Float32, DType::Float64, DType::Int32}) {
    InputSpec input = floats(x);
    input.dtype = dtype;
    if (dtype == DType::Int32) input.lo = -50, input.hi = 50;
    cases.push_back({.name = "Resize_scales_" + std::string(dtype_name(dtype)),
                     .node = node_with("Resize", {"x", "", "scales"}, modes("linear", "")),
                     .inputs = {input, scales({1, 1, 2, 2})},
                     .opset = 13});
  }
  // Opset 18: sizes of the last two axes only, and antialiased linear downsampling.
  cases.push_back({.name = "Resize_opset18_axes",
                   .node = node_with("Resize", {"x", "", "", "sizes"},
                                     {{"mode", Attribute::of_string("linear")},
                                      {"axes", Attribute::of_ints({2, 3})}}),
                   .inputs = {floats(x), testing::constant_int64s({6, 8})},
                   .opset = 18});
  cases.push_back({.name = "Resize_opset18_antialias",
                   .node = node_with("Resize", {"x", "", "", "sizes"},
                                     {{"mode", Attribute::of_string("linear")},
                                      {"antialias", Attribute::of_int(1)}}),
                   .inputs = {floats({1, 2, 9, 10}), testing::constant_int64s({1, 2, 4, 3})},
                   .opset = 18});
  // Opset 19's half_pixel_symmetric.
  cases.push_back(
      {.name = "Resize_opset19_half_pixel_symmetric",
       .node = node_with("Resize", {"x", "", "", "sizes"}, modes("linear", "half_pixel_symmetric")),
       .inputs = {floats(x), testing::constant_int64s({1, 2, 6, 7})},
       .opset = 19});
}

void add_upsample_cases(std::vector<OpCase>& cases) {
  for (const std::string mode : {"nearest", "linear"}) {
    // Scales as an attribute (opsets 7 and 8), then as an input (9).
    cases.push_back({.name = "Upsample_opset7_" + mode,
                     .node = node_with("Upsample", {"x"},
                                       {{"mode", Attribute::of_string(mode)},
                                        {"scales", Attribute{.kind = Attribute::Kind::Floats,
                                                             .floats = {1, 1, 2, 3}}}}),
                     .inputs = {floats({1, 2, 3, 4})},
                     .opset = 7});
    cases.push_back(
        {.name = "Upsample_opset9_" + mode,
         .node = node_with("Upsample", {"x", "scales"}, {{"mode", Attribute::of_string(mode)}}),
         .inputs = {floats({1, 2, 3, 4}), scales({1, 1, 3, 2})},
         .opset = 9});
  }
}

DPRUN_OP_CASES_WITH_HOST_ONLY(Resample, {}, kHostOnlyOps, add_resize_cases, add_upsample_cases);

}  // namespace
}  // namespace dprun
