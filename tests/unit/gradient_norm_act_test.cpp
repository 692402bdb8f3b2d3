// Finite-difference cases for the gradient rules of InstanceNormalization, GroupNormalization
// (and PyTorch's export of GroupNorm before opset 18), PRelu, Mish, Celu, Softsign,
// ThresholdedRelu, the trigonometric and hyperbolic functions, LpNormalization, and the
// piecewise-constant Floor, Ceil, Round and Sign (whose gradient is exactly zero).
// tests/unit/gradient_test.cpp runs them through the registry.
#include <cmath>

#include "gradient_check.h"

namespace dprun {
namespace {

using namespace dprun::testing;

Input constant(const std::string& name, Tensor t) {
  return {name, std::move(t), true};
}

Input values(const std::string& name, const Shape& shape, std::vector<double> v) {
  return {name, Tensor::from_vector<double>(shape, std::move(v))};
}

// Finite differences at `opset` under each of `decls`.
void check_decls(const std::vector<Node>& nodes, const std::vector<Input>& inputs,
                 const std::string& y, const std::vector<std::string>& xs, int64_t opset,
                 std::initializer_list<Decl> decls) {
  for (Decl decl : decls) check_gradients(nodes, inputs, y, xs, opset, decl);
}

constexpr std::initializer_list<Decl> kEveryDecl = {Decl::Full, Decl::Batch, Decl::Symbolic,
                                                    Decl::None};

// The gradients of `xs` the training graph computes for y = nodes(inputs) and the given dY.
std::vector<Tensor> run_gradients(const std::vector<Node>& nodes, const std::vector<Input>& inputs,
                                  const std::string& y, const std::vector<std::string>& xs,
                                  int64_t opset, const Tensor& dy) {
  auto train = training_graph(*make_graph(nodes, inputs, y, opset, Decl::Full), xs);
  std::vector<Tensor> feeds = feeds_of(inputs);
  feeds.push_back(dy);
  return Model(train, Device::cpu()).run(feeds);
}

Tensor ones(const Shape& shape) {
  return Tensor::from_vector<double>(
      shape, std::vector<double>(static_cast<size_t>(shape_numel(shape)), 1));
}

// ---- InstanceNormalization ----

Node instance_norm(const std::string& x, const std::string& scale, const std::string& b,
                   const std::string& y, float epsilon = 1e-5f) {
  return node("InstanceNormalization", {x, scale, b}, {y},
              {{"epsilon", Attribute::of_float(epsilon)}});
}

DPRUN_GRADIENT_CASE(InstanceNormalization, InstanceNorm1d) {
  // [N, C, L] as nn.InstanceNorm1d(affine=True) exports it; at opset 12 the ReduceMean axes are
  // attributes, at 17 and 18 inputs; without a declared rank X is reshaped to [N, C, S].
  std::vector<Node> n = {instance_norm("x", "scale", "b", "y")};
  std::vector<Input> inputs = {in("x", {2, 3, 5}, 1), in("scale", {3}, 2), in("b", {3}, 3)};
  check_all_ways(n, inputs, "y", {"x", "scale", "b"});
  check_decls(n, inputs, "y", {"x", "scale", "b"}, 18, {Decl::Batch, Decl::None});
}

DPRUN_GRADIENT_CASE(InstanceNormalization, InstanceNorm2dAnd3dWithEpsilon) {
  // A large epsilon matters to every gradient (a rule ignoring it fails here).
  std::vector<Node> n = {instance_norm("x", "scale", "b", "y", 0.5f)};
  check_decls(n, {in("x", {2, 2, 3, 3}, 4), in("scale", {2}, 5), in("b", {2}, 6)}, "y",
              {"x", "scale", "b"}, 17, kEveryDecl);
  check_decls(n, {in("x", {1, 2, 2, 2, 3}, 7), in("scale", {2}, 8), in("b", {2}, 9)}, "y",
              {"x", "scale", "b"}, 12, {Decl::Full});
  check_decls(n, {in("x", {1, 2, 2, 2, 3}, 7), in("scale", {2}, 8), in("b", {2}, 9)}, "y",
              {"x", "scale", "b"}, 17, {Decl::Symbolic, Decl::None});
}

DPRUN_GRADIENT_CASE(InstanceNormalization, InstanceNormWithoutSpatialAxes) {
  // [N, C]: each row has one element, so Y = B and dX = dscale = 0 (as the kernel runs it).
  std::vector<Node> n = {instance_norm("x", "scale", "b", "y")};
  std::vector<Input> inputs = {in("x", {3, 4}, 1), in("scale", {4}, 2), in("b", {4}, 3)};
  check_decls(n, inputs, "y", {"x", "scale", "b"}, 17, {Decl::Full, Decl::None});
  auto g = run_gradients(n, inputs, "y", {"x", "b"}, 17, ones({3, 4}));
  for (int64_t i = 0; i < 12; ++i) EXPECT_EQ(g[0].item_as_double(i), 0.0);
  for (int64_t i = 0; i < 4; ++i) EXPECT_DOUBLE_EQ(g[1].item_as_double(i), 3.0);
}

// GroupNorm(groups, C) as PyTorch exports it before opset 18 (here at 13-17, Unsqueeze's axes an
// input): Reshape to [N, groups, -1], InstanceNormalization with unit scale and zero bias,
// Reshape back to X's shape, then the affine transform with the weight and bias unsqueezed to
// [C, 1, ...]. `tag` prefixes the names of its values.
std::vector<Node> exported_group_norm(const std::string& x, const std::string& y,
                                      const std::string& tag) {
  auto unsqueeze = [&](const std::string& v) {
    return node("Unsqueeze", {tag + v, tag + "axes"}, {tag + v + "_u"});
  };
  return {node("Reshape", {x, tag + "grouped"}, {tag + "r"}),
          instance_norm(tag + "r", tag + "ones", tag + "zeros", tag + "n"),
          node("Shape", {x}, {tag + "dims"}),
          node("Reshape", {tag + "n", tag + "dims"}, {tag + "back"}),
          unsqueeze("w"),
          unsqueeze("b"),
          node("Mul", {tag + "back", tag + "w_u"}, {tag + "scaled"}),
          node("Add", {tag + "scaled", tag + "b_u"}, {y})};
}

// The exported form's constants (groups ones and zeros, the grouping shape, the axes) and its
// weight and bias.
std::vector<Input> exported_group_norm_inputs(int64_t groups, int64_t channels, int64_t rank,
                                              const std::string& tag, uint32_t seed) {
  std::vector<int64_t> axes;
  for (int64_t a = 1; a + 1 < rank; ++a) axes.push_back(a);
  return {constant(tag + "grouped", Tensor::from_vector<int64_t>({3}, {0, groups, -1})),
          constant(tag + "ones", ones({groups})),
          constant(tag + "zeros", Tensor::from_vector<double>(
                                      {groups}, std::vector<double>(static_cast<size_t>(groups)))),
          constant(tag + "axes",
                   Tensor::from_vector<int64_t>({static_cast<int64_t>(axes.size())}, axes)),
          in(tag + "w", {channels}, seed),
          in(tag + "b", {channels}, seed + 1)};
}

DPRUN_GRADIENT_CASE(InstanceNormalization, GroupNormAsPyTorchExportsIt) {
  // At opset 17 (before 13 Add and Mul would need the shapes shape inference declares on the
  // values between the nodes, which these graphs do not carry).
  std::vector<Input> inputs_1d = exported_group_norm_inputs(2, 4, 3, "", 2);
  inputs_1d.push_back(in("x", {2, 4, 3}, 1));
  check_decls(exported_group_norm("x", "y", ""), inputs_1d, "y", {"x", "w", "b"}, 17,
              {Decl::Full, Decl::Symbolic, Decl::None});
  std::vector<Input> inputs = exported_group_norm_inputs(3, 6, 4, "", 4);
  inputs.push_back(in("x", {2, 6, 2, 2}, 3));
  check_decls(exported_group_norm("x", "y", ""), inputs, "y", {"x", "w", "b"}, 17,
              {Decl::Batch, Decl::None});
}

DPRUN_GRADIENT_CASE(InstanceNormalization, Conv1dGroupNormPReluInstanceNorm) {
  // The net that could not train: Conv1d -> GroupNorm(2, 4) (the exported form) -> PReLU(4)
  // -> InstanceNorm1d(4, affine=True), every parameter differentiated.
  std::vector<Node> nodes = {
      node("Conv", {"x", "W", "B"}, {"c"},
           {{"kernel_shape", Attribute::of_ints({3})}, {"pads", Attribute::of_ints({1, 1})}})};
  for (const Node& n : exported_group_norm("c", "gn", "gn/")) nodes.push_back(n);
  nodes.push_back(node("PRelu", {"gn", "slope"}, {"act"}));
  nodes.push_back(instance_norm("act", "scale", "bias", "y"));
  std::vector<Input> inputs = exported_group_norm_inputs(2, 4, 3, "gn/", 5);
  for (Input i : {in("x", {2, 2, 6}, 1), in("W", {4, 2, 3}, 2), in("B", {4}, 3),
                  in("slope", {4, 1}, 4, 0.1, 0.5), in("scale", {4}, 8), in("bias", {4}, 9)})
    inputs.push_back(i);
  check_decls(nodes, inputs, "y", {"x", "W", "B", "gn/w", "gn/b", "slope", "scale", "bias"}, 17,
              {Decl::Full, Decl::Batch});
}

// ---- GroupNormalization ----

Node group_norm(int64_t groups, float epsilon = 1e-5f) {
  return node(
      "GroupNormalization", {"x", "scale", "b"}, {"y"},
      {{"num_groups", Attribute::of_int(groups)}, {"epsilon", Attribute::of_float(epsilon)}});
}

DPRUN_GRADIENT_CASE(GroupNormalization, GroupNormPerGroupParameters) {
  // Opset 18's form: scale and B of num_groups elements. Under Decl::None their size is not
  // known when building, and the run time decides the reduction.
  std::vector<Input> inputs = {in("x", {2, 6, 2, 2}, 1), in("scale", {3}, 2), in("b", {3}, 3)};
  check_decls({group_norm(3)}, inputs, "y", {"x", "scale", "b"}, 18, kEveryDecl);
  std::vector<Input> one_d = {in("x", {2, 4, 5}, 4), in("scale", {2}, 5), in("b", {2}, 6)};
  check_decls({group_norm(2, 0.3f)}, one_d, "y", {"x", "scale", "b"}, 18, {Decl::Full, Decl::None});
}

DPRUN_GRADIENT_CASE(GroupNormalization, GroupNormPerChannelParameters) {
  // Opset 21's form, scale and B of C elements (the kernel takes it at 18 too); 1-D and 3-D
  // spatial; one group (LayerNorm over C and space) and one group per channel (InstanceNorm).
  std::vector<Input> one_d = {in("x", {2, 6, 5}, 1), in("scale", {6}, 2), in("b", {6}, 3)};
  check_decls({group_norm(2, 0.01f)}, one_d, "y", {"x", "scale", "b"}, 21, kEveryDecl);
  check_decls({group_norm(3)}, one_d, "y", {"x", "scale", "b"}, 18, {Decl::Full});
  std::vector<Input> three_d = {in("x", {1, 4, 2, 2, 2}, 4), in("scale", {4}, 5), in("b", {4}, 6)};
  check_decls({group_norm(2)}, three_d, "y", {"x", "scale", "b"}, 21, {Decl::Full, Decl::None});
  check_decls({group_norm(1)}, three_d, "y", {"x", "scale", "b"}, 21, {Decl::Symbolic});
  check_decls({group_norm(4)}, three_d, "y", {"x", "scale", "b"}, 18, {Decl::Full, Decl::None});
}

DPRUN_GRADIENT_CASE(GroupNormalization, GroupNormWithoutSpatialAxes) {
  std::vector<Input> inputs = {in("x", {3, 4}, 1), in("scale", {2}, 2), in("b", {2}, 3)};
  check_decls({group_norm(2)}, inputs, "y", {"x", "scale", "b"}, 18, {Decl::Full, Decl::None});
}

// ---- PRelu ----

DPRUN_GRADIENT_CASE(PRelu, PReluPerChannelSlope) {
  // nn.PReLU(C) exports its weight as [C, 1, 1]: summed over N and the spatial axes.
  std::vector<Node> n = {node("PRelu", {"x", "slope"}, {"y"})};
  std::vector<Input> inputs = {in("x", {2, 3, 2, 2}, 1), in("slope", {3, 1, 1}, 2, 0.1, 0.9)};
  check_decls(n, inputs, "y", {"x", "slope"}, 17, kEveryDecl);
  check_decls(n, inputs, "y", {"x", "slope"}, 9, {Decl::Full});
}

DPRUN_GRADIENT_CASE(PRelu, PReluScalarAndFullSlopes) {
  std::vector<Node> n = {node("PRelu", {"x", "slope"}, {"y"})};
  for (Shape slope : {Shape{}, Shape{1}, Shape{3, 4}, Shape{2, 3, 4}})
    check_all_ways(n, {in("x", {2, 3, 4}, 3), in("slope", slope, 4, -0.5, 0.9)}, "y",
                   {"x", "slope"});
}

DPRUN_GRADIENT_CASE(PRelu, PReluSlopeAtZero) {
  // X == 0 takes the slope, as PyTorch's prelu backward does.
  std::vector<Node> n = {node("PRelu", {"x", "slope"}, {"y"})};
  std::vector<Input> inputs = {values("x", {3}, {0, 2, -2}), values("slope", {1}, {0.25})};
  auto g = run_gradients(n, inputs, "y", {"x", "slope"}, 17, ones({3}));
  EXPECT_DOUBLE_EQ(g[0].item_as_double(0), 0.25);
  EXPECT_DOUBLE_EQ(g[0].item_as_double(1), 1.0);
  EXPECT_DOUBLE_EQ(g[0].item_as_double(2), 0.25);
  EXPECT_DOUBLE_EQ(g[1].item_as_double(0), -2.0);
}

DPRUN_GRADIENT_CASE(PRelu, NumpyBroadcastingRulesRefuseOpset6) {
  // Before opset 7 the emitted Mul, Add and Greater would not broadcast: refused, saying so.
  auto refused = [](const Node& n, std::vector<Input> inputs) {
    auto g = make_graph({n}, inputs, "y", 6, Decl::Full);
    try {
      build_gradient(*g, GradientSpec{{"x"}, "y", "dY"});
      ADD_FAILURE() << n.op_type << " built at opset 6";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("needs ai.onnx opset >= 7"), std::string::npos)
          << e.what();
    }
  };
  refused(node("PRelu", {"x", "slope"}, {"y"}), {in("x", {2, 3}, 1), in("slope", {2, 3}, 2)});
  refused(instance_norm("x", "scale", "b", "y"),
          {in("x", {2, 3, 4}, 1), in("scale", {3}, 2), in("b", {3}, 3)});
  refused(node("Softsign", {"x"}, {"y"}), {in("x", {3}, 1)});
  refused(node("ThresholdedRelu", {"x"}, {"y"}), {in("x", {3}, 1)});
  refused(node("LpNormalization", {"x"}, {"y"}), {in("x", {2, 3}, 1)});
}

// ---- smooth and thresholded activations ----

// Finite differences for a one-input op at each opset, under each declaration.
void check_unary(const Node& n, double lo, double hi, std::initializer_list<int64_t> opsets,
                 const Shape& shape = {3, 4}) {
  for (int64_t opset : opsets)
    check_decls({n}, {in("x", shape, 11, lo, hi)}, "y", {"x"}, opset,
                {Decl::Full, Decl::Symbolic, Decl::None});
}

DPRUN_GRADIENT_CASE(Mish, MishRandom) {
  check_unary(node("Mish", {"x"}, {"y"}), -4, 4, {18});
}

DPRUN_GRADIENT_CASE(Celu, CeluAlpha) {
  check_unary(node("Celu", {"x"}, {"y"}), -3, 3, {12, 17});
  check_unary(node("Celu", {"x"}, {"y"}, {{"alpha", Attribute::of_float(0.4f)}}), -2, 2, {17});
}

DPRUN_GRADIENT_CASE(Celu, CeluLargeInputsStayFinite) {
  // exp(X / alpha) of a large X overflows; the gradient there is 1, not NaN.
  std::vector<Node> n = {node("Celu", {"x"}, {"y"}, {{"alpha", Attribute::of_float(0.5f)}})};
  std::vector<Input> inputs = {values("x", {3}, {800, -800, -1})};
  auto g = run_gradients(n, inputs, "y", {"x"}, 17, ones({3}));
  EXPECT_DOUBLE_EQ(g[0].item_as_double(0), 1.0);
  EXPECT_DOUBLE_EQ(g[0].item_as_double(1), 0.0);
  EXPECT_NEAR(g[0].item_as_double(2), std::exp(-2.0), 1e-15);
}

DPRUN_GRADIENT_CASE(Softsign, SoftsignRandom) {
  check_unary(node("Softsign", {"x"}, {"y"}), -3, 3, {7, 17});
}

DPRUN_GRADIENT_CASE(ThresholdedRelu, ThresholdedReluAlpha) {
  check_unary(node("ThresholdedRelu", {"x"}, {"y"}), -2, 2, {10, 17});
  for (float alpha : {0.3f, -0.5f})
    check_unary(node("ThresholdedRelu", {"x"}, {"y"}, {{"alpha", Attribute::of_float(alpha)}}), -1,
                1, {17});
}

// ---- trigonometric and hyperbolic ----

DPRUN_GRADIENT_CASE(Tan, TanRandom) {
  check_unary(node("Tan", {"x"}, {"y"}), -1.2, 1.2, {7, 17});
}
DPRUN_GRADIENT_CASE(Asin, AsinRandom) {
  check_unary(node("Asin", {"x"}, {"y"}), -0.9, 0.9, {7, 17});
}
DPRUN_GRADIENT_CASE(Acos, AcosRandom) {
  check_unary(node("Acos", {"x"}, {"y"}), -0.9, 0.9, {7, 17});
}
DPRUN_GRADIENT_CASE(Atan, AtanRandom) {
  check_unary(node("Atan", {"x"}, {"y"}), -3, 3, {7, 17});
}
DPRUN_GRADIENT_CASE(Sinh, SinhRandom) {
  check_unary(node("Sinh", {"x"}, {"y"}), -2, 2, {9, 17});
}
DPRUN_GRADIENT_CASE(Cosh, CoshRandom) {
  check_unary(node("Cosh", {"x"}, {"y"}), -2, 2, {9, 17});
}
DPRUN_GRADIENT_CASE(Asinh, AsinhRandom) {
  check_unary(node("Asinh", {"x"}, {"y"}), -3, 3, {9, 17});
}
DPRUN_GRADIENT_CASE(Acosh, AcoshRandom) {
  check_unary(node("Acosh", {"x"}, {"y"}), 1.1, 4, {9, 17});
}
DPRUN_GRADIENT_CASE(Atanh, AtanhRandom) {
  check_unary(node("Atanh", {"x"}, {"y"}), -0.9, 0.9, {9, 17});
}

// ---- LpNormalization ----

DPRUN_GRADIENT_CASE(LpNormalization, LpNormEveryAxis) {
  // p = 1 and 2 along each axis, negative ones included; opset 7 (attribute axes, no Where),
  // 12, and 18 (axes as an input).
  for (int64_t p : {1, 2})
    for (int64_t axis : {0, 1, 2, -1, -3}) {
      SCOPED_TRACE("p " + std::to_string(p) + " axis " + std::to_string(axis));
      Node n = node("LpNormalization", {"x"}, {"y"},
                    {{"p", Attribute::of_int(p)}, {"axis", Attribute::of_int(axis)}});
      std::vector<Input> inputs = {in("x", {3, 4, 2}, 5 + static_cast<uint32_t>(p))};
      check_decls({n}, inputs, "y", {"x"}, 7, {Decl::Full});
      check_decls({n}, inputs, "y", {"x"}, 12, {Decl::Symbolic});
      check_decls({n}, inputs, "y", {"x"}, 18, {Decl::Full, Decl::None});
    }
  check_unary(node("LpNormalization", {"x"}, {"y"}), -1, 1, {17}, {2, 5});  // the defaults
}

DPRUN_GRADIENT_CASE(LpNormalization, LpNormZeroRowGetsZeroGradient) {
  // The kernel maps a zero row to zeros; its gradient is zero there, finite elsewhere.
  for (int64_t p : {1, 2}) {
    Node n = node("LpNormalization", {"x"}, {"y"},
                  {{"p", Attribute::of_int(p)}, {"axis", Attribute::of_int(1)}});
    std::vector<Input> inputs = {values("x", {2, 3}, {0, 0, 0, 1, -2, 2})};
    Tensor dy = values("dy", {2, 3}, {1, 2, 3, 0.5, -1, 2}).value;
    auto g = run_gradients({n}, inputs, "y", {"x"}, 17, dy);
    for (int64_t i = 0; i < 3; ++i) EXPECT_EQ(g[0].item_as_double(i), 0.0) << "p " << p;
    // The second row by hand: n = 5 (p 1) or 3 (p 2), sum(dY * Y) = (0.5 + 2 + 4) / n.
    double norm = p == 1 ? 5 : 3, along = 6.5 / norm;
    std::vector<double> x = {1, -2, 2}, d = {0.5, -1, 2};
    for (int64_t j = 0; j < 3; ++j) {
      double s = p == 1 ? (x[j] > 0 ? 1 : -1) : x[j] / norm;
      EXPECT_NEAR(g[0].item_as_double(3 + j), (d[j] - s * along) / norm, 1e-15) << "p " << p;
    }
  }
}

// ---- piecewise constant: zero gradient ----

// The op's gradient matches finite differences (zero away from its jumps) and is exactly 0 (the
// builder's zeros for an x reached through nothing else: ConstantOfShape, opset 9).
void check_zero_gradient(const std::string& op, std::initializer_list<int64_t> opsets) {
  // Values at least 0.05 from every multiple of 0.5, so no step crosses a jump of any of them
  // (Round's are at the halves).
  std::vector<double> v = {-2.7, -1.3, -0.45, 0.35, 0.8, 1.2, 2.25, 3.6};
  for (int64_t opset : opsets) {
    check_decls({node(op, {"x"}, {"y"})}, {values("x", {2, 4}, v)}, "y", {"x"}, opset,
                {Decl::Full, Decl::None});
    auto g = run_gradients({node(op, {"x"}, {"y"})}, {values("x", {2, 4}, v)}, "y", {"x"}, opset,
                           random_tensor({2, 4}, -1, 1, 3));
    for (int64_t i = 0; i < 8; ++i) EXPECT_EQ(g[0].item_as_double(i), 0.0) << op;
  }
}

DPRUN_GRADIENT_CASE(Floor, FloorIsZero) {
  check_zero_gradient("Floor", {9, 17});
}
DPRUN_GRADIENT_CASE(Ceil, CeilIsZero) {
  check_zero_gradient("Ceil", {9, 17});
}
DPRUN_GRADIENT_CASE(Round, RoundIsZero) {
  check_zero_gradient("Round", {11, 17});
}
DPRUN_GRADIENT_CASE(Sign, SignIsZero) {
  check_zero_gradient("Sign", {9, 17});
}

DPRUN_GRADIENT_CASE(Floor, XTimesFloorOfXTrains) {
  // y = x * floor(x): dy/dx = floor(x) (+ x * 0), exactly with dY = 1.
  std::vector<Node> n = {node("Floor", {"x"}, {"f"}), node("Mul", {"x", "f"}, {"y"})};
  std::vector<Input> inputs = {values("x", {5}, {-2.5, -0.5, 0.5, 1.75, 3.2})};
  check_all_ways(n, inputs, "y", {"x"});
  auto g = run_gradients(n, inputs, "y", {"x"}, 17, ones({5}));
  std::vector<double> expected = {-3, -1, 0, 1, 3};
  for (int64_t i = 0; i < 5; ++i) EXPECT_EQ(g[0].item_as_double(i), expected[i]);
}

}  // namespace
}  // namespace dprun
