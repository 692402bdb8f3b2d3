// Finite-difference cases for the gradient rules of Resize, Upsample, DepthToSpace and
// SpaceToDepth (tests/unit/gradient_test.cpp runs them through the registry), and checks of
// what the Resize rule emits and refuses.
//
// Every resized axis changes length, so a transposed interpolation matrix cannot even take
// the shape of dX, and the scales put output positions between input positions (and on ties
// for the rounding modes), so a matrix off by one position or one rounding gives other
// gradients than the forward kernel's finite differences.
#include <numeric>

#include "gradient_check.h"

namespace dprun {
namespace {

using namespace dprun::testing;

Input floats(const std::string& name, const std::vector<float>& v) {
  return {name, Tensor::from_vector<float>({static_cast<int64_t>(v.size())}, v), true};
}

Input int64s(const std::string& name, const std::vector<int64_t>& v) {
  return {name, Tensor::from_vector<int64_t>({static_cast<int64_t>(v.size())}, v), true};
}

std::map<std::string, Attribute> modes(const std::string& mode, const std::string& coord) {
  return {{"mode", Attribute::of_string(mode)},
          {"coordinate_transformation_mode", Attribute::of_string(coord)}};
}

// Resize of "x" by constant scales (opset 11 on: X, roi, scales).
Node by_scales(std::map<std::string, Attribute> attrs) {
  return node("Resize", {"x", "", "scales"}, {"y"}, std::move(attrs));
}

// Resize of "x" to constant sizes.
Node by_sizes(std::map<std::string, Attribute> attrs) {
  return node("Resize", {"x", "", "", "sizes"}, {"y"}, std::move(attrs));
}

// Finite differences with every dim declared, and with a dynamic batch (dim 0 a symbol),
// which the rule handles where the node copies dim 0 (scale 1).
void check_static_and_batch(const Node& n, const std::vector<Input>& inputs, int64_t opset,
                            bool batch = true) {
  check_gradients({n}, inputs, "y", {"x"}, opset, Decl::Full);
  if (batch) check_gradients({n}, inputs, "y", {"x"}, opset, Decl::Batch);
}

// ---- Resize: nearest ----

// A nearest Resize by constant scales with transformation `coord` and rounding `rounding`.
void check_nearest(const std::string& coord, const std::string& rounding, const Shape& shape,
                   const std::vector<float>& scales, int64_t opset, uint32_t seed) {
  auto attrs = modes("nearest", coord);
  attrs["nearest_mode"] = Attribute::of_string(rounding);
  check_static_and_batch(by_scales(attrs), {in("x", shape, seed), floats("scales", scales)}, opset);
}

DPRUN_GRADIENT_CASE(Resize, ResizeNearestAsymmetricFloor) {
  // Rows 3 -> 6 (each read twice), columns 4 -> 6 (x / 1.5: 0, 0.67, 1.33, 2, 2.67, 3.33).
  check_nearest("asymmetric", "floor", {2, 3, 3, 4}, {1, 1, 2, 1.5f}, 13, 1);
}

DPRUN_GRADIENT_CASE(Resize, ResizeNearestHalfPixelRoundPreferFloor) {
  // Rows 4 -> 2 land on ties (2o + 0.5): floor takes rows 0 and 2, never 1 and 3.
  check_nearest("half_pixel", "round_prefer_floor", {1, 2, 4, 6}, {1, 1, 0.5f, 1.5f}, 11, 2);
}

DPRUN_GRADIENT_CASE(Resize, ResizeNearestSymmetricRoundPreferCeil) {
  // Rows 7 -> 4 (4.2 rounded down: the symmetric offset differs from half_pixel's).
  check_nearest("half_pixel_symmetric", "round_prefer_ceil", {2, 1, 7, 4}, {1, 1, 0.6f, 2.25f}, 19,
                3);
}

DPRUN_GRADIENT_CASE(Resize, ResizeNearestOpset10) {
  // Opset 10: X and scales only, asymmetric with the legacy rounding (ceil when shrinking).
  Node n = node("Resize", {"x", "scales"}, {"y"});
  // Rows 7 -> 4 read rows 0, 2, 4, 5.
  check_static_and_batch(n, {in("x", {2, 1, 7, 4}, 4), floats("scales", {1, 1, 0.6f, 1.5f})}, 10);
}

// ---- Resize: linear ----

DPRUN_GRADIENT_CASE(Resize, ResizeBilinearAlignCornersSizes) {
  // Sizes on every axis, the batch among them, so only fully declared shapes will do.
  check_static_and_batch(by_sizes(modes("linear", "align_corners")),
                         {in("x", {2, 2, 3, 4}, 5), int64s("sizes", {2, 2, 5, 7})}, 13, false);
}

DPRUN_GRADIENT_CASE(Resize, ResizeBilinearHalfPixelScales) {
  // Rows 3 -> 7 (scale 2.5), columns 5 -> 3 (scale 0.6).
  check_static_and_batch(by_scales(modes("linear", "half_pixel")),
                         {in("x", {2, 2, 3, 5}, 6), floats("scales", {1, 1, 2.5f, 0.6f})}, 19);
}

DPRUN_GRADIENT_CASE(Resize, ResizeBilinearPytorchHalfPixelToOneRow) {
  // Rows 4 -> 1: pytorch_half_pixel reads row 0 alone (half_pixel would mix rows 1 and 2).
  check_static_and_batch(by_scales(modes("linear", "pytorch_half_pixel")),
                         {in("x", {2, 2, 4, 3}, 7), floats("scales", {1, 1, 0.25f, 2})}, 13);
}

DPRUN_GRADIENT_CASE(Resize, ResizeBilinearRuntimeSizes) {
  // F.interpolate(size=...) as exported: sizes = Concat(Shape(x)[:2], [5, 7]), known only at
  // run time; the rule reads the sizes from Y's declared shape, the batch being X's symbol.
  std::vector<Node> nodes = {
      node("Shape", {"x"}, {"xs"}), node("Slice", {"xs", "zero", "two"}, {"nc"}),
      node("Concat", {"nc", "hw"}, {"sizes"}, {{"axis", Attribute::of_int(0)}}),
      by_sizes(modes("linear", "half_pixel"))};
  std::vector<Input> inputs = {in("x", {2, 2, 3, 4}, 8), int64s("zero", {0}), int64s("two", {2}),
                               int64s("hw", {5, 7})};
  check_gradients(nodes, inputs, "y", {"x"}, 13, Decl::Full);
  check_gradients(nodes, inputs, "y", {"x"}, 13, Decl::Batch);
}

DPRUN_GRADIENT_CASE(Resize, ResizeLinear1D) {
  // 7 -> 10 along the only axis, asymmetric (the last positions clamp onto the last input).
  check_static_and_batch(by_scales(modes("linear", "asymmetric")),
                         {in("x", {7}, 9), floats("scales", {1.5f})}, 11, false);
}

DPRUN_GRADIENT_CASE(Resize, ResizeTrilinear3D) {
  // D 3 -> 6, H 4 -> 2, W 5 -> 8: the D axis goes through the Transpose path.
  check_static_and_batch(by_scales(modes("linear", "half_pixel")),
                         {in("x", {2, 2, 3, 4, 5}, 10), floats("scales", {1, 1, 2, 0.5f, 1.6f})},
                         13);
}

DPRUN_GRADIENT_CASE(Resize, ResizeLinearAntialiasAxes) {
  // Opset 18: scales for axes (2, 3) only; antialias widens the downsampling filter.
  auto attrs = modes("linear", "half_pixel");
  attrs["antialias"] = Attribute::of_int(1);
  attrs["axes"] = Attribute::of_ints({2, -1});
  check_static_and_batch(by_scales(attrs),
                         {in("x", {2, 2, 8, 6}, 11), floats("scales", {0.5f, 0.75f})}, 18);
}

DPRUN_GRADIENT_CASE(Resize, ResizeLinearTfCropAndResize) {
  // Crops that reach outside X: the extrapolated outputs give X no gradient.
  auto attrs = modes("linear", "tf_crop_and_resize");
  attrs["extrapolation_value"] = Attribute::of_float(0.5f);
  Node n = node("Resize", {"x", "roi", "", "sizes"}, {"y"}, attrs);
  check_static_and_batch(
      n,
      {in("x", {1, 2, 4, 5}, 12), floats("roi", {0, 0, 0.1f, -0.2f, 1, 1, 0.9f, 1.1f}),
       int64s("sizes", {1, 2, 3, 6})},
      13, false);
}

// ---- Resize: cubic ----

DPRUN_GRADIENT_CASE(Resize, ResizeCubicUpsample) {
  auto attrs = modes("cubic", "half_pixel");
  attrs["cubic_coeff_a"] = Attribute::of_float(-0.75f);
  check_static_and_batch(by_scales(attrs),
                         {in("x", {2, 1, 4, 5}, 13), floats("scales", {1, 1, 2, 1.6f})}, 11);
}

DPRUN_GRADIENT_CASE(Resize, ResizeCubicExcludeOutsideDownsample) {
  auto attrs = modes("cubic", "asymmetric");
  attrs["cubic_coeff_a"] = Attribute::of_float(-0.5f);
  attrs["exclude_outside"] = Attribute::of_int(1);
  check_static_and_batch(by_scales(attrs),
                         {in("x", {2, 1, 6, 5}, 14), floats("scales", {1, 1, 0.5f, 0.8f})}, 13);
}

DPRUN_GRADIENT_CASE(Resize, ResizeCubicSizesOpset19) {
  auto attrs = modes("cubic", "align_corners");
  attrs["cubic_coeff_a"] = Attribute::of_float(-0.5f);
  check_static_and_batch(by_sizes(attrs),
                         {in("x", {1, 1, 4, 6}, 15), int64s("sizes", {1, 1, 7, 4})}, 19, false);
}

// ---- Upsample ----

DPRUN_GRADIENT_CASE(Upsample, UpsampleOpset9ScalesInput) {
  Node n = node("Upsample", {"x", "scales"}, {"y"}, {{"mode", Attribute::of_string("nearest")}});
  check_static_and_batch(n, {in("x", {2, 2, 3, 3}, 16), floats("scales", {1, 1, 2, 3})}, 9);
}

DPRUN_GRADIENT_CASE(Upsample, UpsampleOpset7ScalesAttribute) {
  Attribute scales;
  scales.kind = Attribute::Kind::Floats;
  scales.floats = {1, 1, 2, 2.5f};
  Node n = node("Upsample", {"x"}, {"y"},
                {{"mode", Attribute::of_string("linear")}, {"scales", scales}});
  check_static_and_batch(n, {in("x", {2, 2, 3, 2}, 17)}, 7);
}

// ---- DepthToSpace / SpaceToDepth ----

DPRUN_GRADIENT_CASE(DepthToSpace, DepthToSpaceDcr) {
  // 8 channels = 2 x 2 x 2: DCR and CRD read different channels for each block position.
  Node n = node("DepthToSpace", {"x"}, {"y"},
                {{"blocksize", Attribute::of_int(2)}, {"mode", Attribute::of_string("DCR")}});
  check_all_ways({n}, {in("x", {2, 8, 2, 3}, 18)}, "y", {"x"});
}

DPRUN_GRADIENT_CASE(DepthToSpace, DepthToSpaceCrd) {
  Node n = node("DepthToSpace", {"x"}, {"y"},
                {{"blocksize", Attribute::of_int(2)}, {"mode", Attribute::of_string("CRD")}});
  check_all_ways({n}, {in("x", {2, 8, 2, 3}, 19)}, "y", {"x"});
  Node b3 = node("DepthToSpace", {"x"}, {"y"},
                 {{"blocksize", Attribute::of_int(3)}, {"mode", Attribute::of_string("CRD")}});
  check_gradients({b3}, {in("x", {1, 18, 2, 1}, 20)}, "y", {"x"}, 13, Decl::None);
}

DPRUN_GRADIENT_CASE(DepthToSpace, DepthToSpaceDefaultModeOpset1) {
  Node n = node("DepthToSpace", {"x"}, {"y"}, {{"blocksize", Attribute::of_int(3)}});
  check_gradients({n}, {in("x", {1, 18, 2, 1}, 21)}, "y", {"x"}, 1, Decl::Full);
}

DPRUN_GRADIENT_CASE(SpaceToDepth, SpaceToDepth) {
  Node n = node("SpaceToDepth", {"x"}, {"y"}, {{"blocksize", Attribute::of_int(2)}});
  check_all_ways({n}, {in("x", {2, 3, 4, 6}, 22)}, "y", {"x"});
  Node b3 = node("SpaceToDepth", {"x"}, {"y"}, {{"blocksize", Attribute::of_int(3)}});
  check_gradients({b3}, {in("x", {1, 2, 3, 6}, 23)}, "y", {"x"}, 13, Decl::Full);
}

// ---- the forward kernel's half_pixel_symmetric ----

TEST(GradientResample, HalfPixelSymmetricFollowsOnnxReference) {
  // ONNX's test_resize_downsample_scales_linear_half_pixel_symmetric: 4 -> 2.4 -> 2 columns,
  // offset 2 * (1 - 2 / 2.4) = 1/3, sampled at 2/3 and 7/3.
  Node n = make_node("Resize", {"x", "", "scales"}, {"y"});
  n.attributes = modes("linear", "half_pixel_symmetric");
  auto x = Tensor::from_vector<float>({1, 1, 1, 4}, {1, 2, 3, 4});
  auto y = run_node(n, {x, Tensor::from_vector<float>({4}, {1, 1, 1, 0.6f})}, 19)[0];
  ASSERT_EQ(y.shape(), (Shape{1, 1, 1, 2}));
  EXPECT_NEAR(y.item_as_double(0), 1.6666666, 1e-5);
  EXPECT_NEAR(y.item_as_double(1), 3.3333333, 1e-5);
  // test_resize_upsample_scales_linear_half_pixel_symmetric: 2x2 -> 4.6x5.88 -> 4x5.
  x = Tensor::from_vector<float>({1, 1, 2, 2}, {1, 2, 3, 4});
  y = run_node(n, {x, Tensor::from_vector<float>({4}, {1, 1, 2.3f, 2.94f})}, 19)[0];
  ASSERT_EQ(y.shape(), (Shape{1, 1, 4, 5}));
  const std::vector<double> first_row = {1, 1.15986395, 1.5, 1.84013605, 2};
  for (size_t j = 0; j < first_row.size(); ++j)
    EXPECT_NEAR(y.item_as_double(static_cast<int64_t>(j)), first_row[j], 1e-5) << j;
}

// ---- what the Resize rule emits and refuses ----

// The backward nodes of one Resize node over `inputs`, declared as `decl`.
GradientResult resize_backward(const Node& n, const std::vector<Input>& inputs, int64_t opset,
                               Decl decl) {
  auto forward = make_graph({n}, inputs, "y", opset, decl);
  GradientSpec spec;
  spec.xs = {"x"};
  spec.y = "y";
  spec.dy = "dY";
  return build_gradient(*forward, spec);
}

int count(const GradientResult& r, const std::string& op) {
  Graph g;
  g.nodes = r.nodes;
  return count_ops(g, op);
}

TEST(GradientResample, OneMatMulPerResizedAxis) {
  std::vector<Input> inputs = {in("x", {2, 3, 4, 5}, 1), floats("scales", {1, 1, 2, 0.6f})};
  // N and C keep their size: no MatMul; H from the left and W from the right: no Transpose.
  GradientResult r =
      resize_backward(by_scales(modes("linear", "half_pixel")), inputs, 13, Decl::Batch);
  EXPECT_EQ(count(r, "MatMul"), 2);
  EXPECT_EQ(count(r, "Transpose"), 0);
  inputs[1] = floats("scales", {1, 1, 1, 0.6f});
  r = resize_backward(by_scales(modes("nearest", "asymmetric")), inputs, 13, Decl::Batch);
  EXPECT_EQ(count(r, "MatMul"), 1);
  // A copy needs no MatMul at all.
  inputs[1] = floats("scales", {1, 1, 1, 1});
  r = resize_backward(by_scales(modes("linear", "half_pixel")), inputs, 13, Decl::Batch);
  EXPECT_EQ(count(r, "MatMul"), 0);
}

void expect_refusal(const Node& n, const std::vector<Input>& inputs, int64_t opset, Decl decl,
                    const std::string& words) {
  try {
    resize_backward(n, inputs, opset, decl);
    ADD_FAILURE() << "no error; expected one saying '" << words << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
  }
}

TEST(GradientResample, RefusesSizesUnknownAtBuildTime) {
  Node n = by_scales(modes("linear", "half_pixel"));
  std::vector<Input> inputs = {in("x", {2, 3, 4, 5}, 1), floats("scales", {1, 1, 2, 2})};
  // Ranks only: the resized axes have no length to build the matrices from.
  expect_refusal(n, inputs, 13, Decl::Symbolic, "size of X's axis 2 is not known at build time");
  // Sizes on the dynamic batch axis.
  expect_refusal(by_sizes(modes("linear", "half_pixel")),
                 {in("x", {2, 3, 4, 5}, 1), int64s("sizes", {2, 3, 8, 10})}, 13, Decl::Batch,
                 "size of X's axis 0 is not known at build time");
  // Scales fed at run time.
  inputs[1].constant = false;
  expect_refusal(n, inputs, 13, Decl::Full, "scales ('scales') is not a constant");
}

}  // namespace
}  // namespace dprun
