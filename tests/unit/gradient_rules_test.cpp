// Finite-difference cases for the gradient rules of elementwise, matrix, shape and reduction
// ops. tests/unit/gradient_test.cpp runs them through the registry.
#include <set>
#include <string>

#include "gradient_check.h"

namespace dprun {
namespace {

using namespace dprun::testing;

// ---- binary arithmetic with broadcasting ----

DPRUN_GRADIENT_CASE(Add, AddSameShape) {
  check_all_ways({node("Add", {"a", "b"}, {"y"})}, {in("a", {2, 3}, 1), in("b", {2, 3}, 2)}, "y",
                 {"a", "b"});
}

DPRUN_GRADIENT_CASE(Add, AddBroadcast) {
  check_all_ways({node("Add", {"a", "b"}, {"y"})}, {in("a", {2, 1, 4}, 1), in("b", {3, 1}, 2)}, "y",
                 {"a", "b"});
  check_all_ways({node("Add", {"a", "b"}, {"y"})}, {in("a", {2, 3}, 1), in("b", {}, 2)}, "y",
                 {"a", "b"});
}

DPRUN_GRADIENT_CASE(Sub, SubBroadcast) {
  check_all_ways({node("Sub", {"a", "b"}, {"y"})}, {in("a", {2, 3}, 1), in("b", {3}, 2)}, "y",
                 {"a", "b"});
}

DPRUN_GRADIENT_CASE(Mul, MulBroadcast) {
  check_all_ways({node("Mul", {"a", "b"}, {"y"})}, {in("a", {4, 1}, 3), in("b", {2, 1, 3}, 4)}, "y",
                 {"a", "b"});
}

DPRUN_GRADIENT_CASE(Div, DivBroadcast) {
  check_all_ways({node("Div", {"a", "b"}, {"y"})},
                 {in("a", {2, 3}, 5), in("b", {1, 3}, 6, 0.5, 2.0)}, "y", {"a", "b"});
}

DPRUN_GRADIENT_CASE(Pow, PowConstantExponent) {
  Input e{"e", Tensor::scalar<double>(3.0), true};
  check_all_ways({node("Pow", {"x", "e"}, {"y"})}, {in("x", {2, 3}, 7), e}, "y", {"x"});
}

DPRUN_GRADIENT_CASE(Pow, PowBothInputs) {
  check_all_ways({node("Pow", {"x", "e"}, {"y"})},
                 {in("x", {2, 3}, 7, 0.5, 2.0), in("e", {3}, 8, -1.5, 2.5)}, "y", {"x", "e"});
}

// ---- unary ----

void check_unary(const char* op, double lo = -1, double hi = 1) {
  check_all_ways({node(op, {"x"}, {"y"})}, {in("x", {3, 4}, 9, lo, hi)}, "y", {"x"});
}

DPRUN_GRADIENT_CASE(Neg, NegRandom) {
  check_unary("Neg");
}
DPRUN_GRADIENT_CASE(Relu, ReluRandom) {
  check_unary("Relu");
}
DPRUN_GRADIENT_CASE(Sigmoid, SigmoidRandom) {
  check_unary("Sigmoid");
}
DPRUN_GRADIENT_CASE(Tanh, TanhRandom) {
  check_unary("Tanh");
}
DPRUN_GRADIENT_CASE(Exp, ExpRandom) {
  check_unary("Exp");
}
DPRUN_GRADIENT_CASE(Identity, IdentityRandom) {
  check_unary("Identity");
}
DPRUN_GRADIENT_CASE(Log, LogPositive) {
  check_unary("Log", 0.2, 3.0);
}
DPRUN_GRADIENT_CASE(Sqrt, SqrtPositive) {
  check_unary("Sqrt", 0.2, 3.0);
}

DPRUN_GRADIENT_CASE(Relu, ReluHandComputed) {
  auto g = make_graph({node("Relu", {"x"}, {"y"})},
                      {{"x", Tensor::from_vector<double>({4}, {-2, -0.5, 0.5, 3})}}, "y", 17,
                      Decl::Full);
  auto train = training_graph(*g, {"x"});
  Model m(train, Device::cpu());
  auto out = m.run(std::vector<Tensor>{Tensor::from_vector<double>({4}, {-2, -0.5, 0.5, 3}),
                                       Tensor::from_vector<double>({4}, {10, 20, 30, 40})});
  std::vector<double> expect = {0, 0, 30, 40};
  for (int i = 0; i < 4; ++i) EXPECT_EQ(out[0].item_as_double(i), expect[static_cast<size_t>(i)]);
}

// ---- matrix products ----

DPRUN_GRADIENT_CASE(MatMul, MatMul2D) {
  check_all_ways({node("MatMul", {"a", "b"}, {"y"})}, {in("a", {3, 4}, 1), in("b", {4, 2}, 2)}, "y",
                 {"a", "b"}, true);
}

DPRUN_GRADIENT_CASE(MatMul, MatMulBatchedBroadcast) {
  check_all_ways({node("MatMul", {"a", "b"}, {"y"})},
                 {in("a", {2, 1, 3, 4}, 1), in("b", {3, 4, 2}, 2)}, "y", {"a", "b"}, true);
  check_all_ways({node("MatMul", {"a", "b"}, {"y"})}, {in("a", {2, 3, 4}, 1), in("b", {4, 5}, 2)},
                 "y", {"a", "b"}, true);
}

// A linear layer over [batch, tokens, features]: dB is one product over every row of A and dY
// (a Gemm with transA from opset 11), without a [batch, K, N] intermediate and its ReduceSum.
TEST(GradientMatMul, AWeightUnderABatchIsOneProductOverTheRows) {
  const auto mm = node("MatMul", {"a", "b"}, {"y"});
  for (int64_t opset : {9, 11, 17})
    for (Decl decl : {Decl::Full, Decl::Symbolic}) {  // the rule needs the ranks
      SCOPED_TRACE(::testing::Message() << "opset " << opset);
      const std::vector<Input> inputs = {in("a", {2, 3, 3, 4}, 1), in("b", {4, 5}, 2)};
      check_gradients({mm}, inputs, "y", {"a", "b"}, opset, decl);
      GradientResult r;
      training_graph(*make_graph({mm}, inputs, "y", opset, decl), {"b"}, &r);
      std::multiset<std::string> ops;
      for (const Node& n : r.nodes) ops.insert(n.op_type);
      EXPECT_EQ(ops.count("ReduceSum"), 0u);
      EXPECT_EQ(ops.count("Flatten"), 2u);
      EXPECT_EQ(ops.count("Gemm"), opset >= 11 ? 1u : 0u);
      EXPECT_EQ(ops.count("MatMul"), opset >= 11 ? 0u : 1u);
    }
}

DPRUN_GRADIENT_CASE(MatMul, MatMulVectors) {
  check_all_ways({node("MatMul", {"a", "b"}, {"y"})}, {in("a", {4}, 1), in("b", {2, 4, 3}, 2)}, "y",
                 {"a", "b"}, true);
  check_all_ways({node("MatMul", {"a", "b"}, {"y"})}, {in("a", {2, 3, 4}, 1), in("b", {4}, 2)}, "y",
                 {"a", "b"}, true);
  check_all_ways({node("MatMul", {"a", "b"}, {"y"})}, {in("a", {4}, 1), in("b", {4}, 2)}, "y",
                 {"a", "b"}, true);
}

DPRUN_GRADIENT_CASE(Gemm, GemmCases) {
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb) {
      SCOPED_TRACE("transA " + std::to_string(ta) + " transB " + std::to_string(tb));
      Shape sa = ta ? Shape{4, 3} : Shape{3, 4};
      Shape sb = tb ? Shape{2, 4} : Shape{4, 2};
      auto n = node("Gemm", {"a", "b", "c"}, {"y"},
                    {{"transA", Attribute::of_int(ta)},
                     {"transB", Attribute::of_int(tb)},
                     {"alpha", Attribute::of_float(0.5f)},
                     {"beta", Attribute::of_float(2.0f)}});
      check_all_ways({n}, {in("a", sa, 1), in("b", sb, 2), in("c", {2}, 3)}, "y", {"a", "b", "c"});
      check_gradients({n}, {in("a", sa, 1), in("b", sb, 2), in("c", {3, 1}, 3)}, "y",
                      {"a", "b", "c"}, 17, Decl::Symbolic);
    }
  // Without C.
  check_all_ways({node("Gemm", {"a", "b"}, {"y"})}, {in("a", {3, 4}, 1), in("b", {4, 2}, 2)}, "y",
                 {"a", "b"});
}

// ---- shape and data movement ----

DPRUN_GRADIENT_CASE(Reshape, ReshapeCases) {
  Input shape{"shape", Tensor::from_vector<int64_t>({2}, {4, -1}), true};
  check_all_ways({node("Reshape", {"x", "shape"}, {"y"})}, {in("x", {2, 3, 2}, 1), shape}, "y",
                 {"x"});
}

DPRUN_GRADIENT_CASE(Transpose, TransposeCases) {
  check_all_ways({node("Transpose", {"x"}, {"y"}, {{"perm", Attribute::of_ints({1, 2, 0})}})},
                 {in("x", {2, 3, 4}, 1)}, "y", {"x"});
  check_all_ways({node("Transpose", {"x"}, {"y"})}, {in("x", {2, 3, 4}, 1)}, "y", {"x"});
}

DPRUN_GRADIENT_CASE(Flatten, FlattenCases) {
  check_all_ways({node("Flatten", {"x"}, {"y"}, {{"axis", Attribute::of_int(2)}})},
                 {in("x", {2, 3, 4}, 1)}, "y", {"x"});
}

DPRUN_GRADIENT_CASE(Concat, ConcatCases) {
  check_all_ways({node("Concat", {"a", "b", "c"}, {"y"}, {{"axis", Attribute::of_int(-1)}})},
                 {in("a", {2, 1}, 1), in("b", {2, 3}, 2), in("c", {2, 2}, 3)}, "y",
                 {"a", "b", "c"});
  check_gradients({node("Concat", {"a", "b"}, {"y"}, {{"axis", Attribute::of_int(0)}})},
                  {in("a", {2, 2}, 1), in("b", {1, 2}, 2)}, "y", {"a", "b"}, 9, Decl::Full);
}

DPRUN_GRADIENT_CASE(Cast, CastBetweenFloatTypes) {
  // float32 -> float64: the gradient comes back as float32.
  auto g = std::make_shared<Graph>();
  g->opset_imports[""] = 17;
  g->inputs.push_back({"x", {DType::Float32, std::nullopt}});
  g->inputs.push_back({"dY", {DType::Float64, std::nullopt}});
  g->nodes.push_back(
      node("Cast", {"x"}, {"y"}, {{"to", Attribute::of_int(int64_t(DType::Float64))}}));
  g->outputs.push_back({"y", {}});
  GradientSpec spec{{"x"}, "y", "dY"};
  auto r = build_gradient(*g, spec);
  for (const auto& n : r.nodes) g->nodes.push_back(n);
  g->outputs = {{r.gradients[0], {}}};
  Model m(g, Device::cpu());
  auto out = m.run(std::vector<Tensor>{Tensor::from_vector<float>({2}, {1, 2}),
                                       Tensor::from_vector<double>({2}, {0.25, -3})});
  ASSERT_EQ(out[0].dtype(), DType::Float32);
  EXPECT_EQ(out[0].data<float>()[0], 0.25f);
  EXPECT_EQ(out[0].data<float>()[1], -3.0f);
}

// ---- reductions and softmax ----

DPRUN_GRADIENT_CASE(ReduceSum, ReduceSumCases) {
  for (int keep = 0; keep < 2; ++keep) {
    SCOPED_TRACE("keepdims " + std::to_string(keep));
    Input axes{"axes", Tensor::from_vector<int64_t>({2}, {-1, 0}), true};
    for (Decl decl : {Decl::Full, Decl::Symbolic})
      check_gradients(
          {node("ReduceSum", {"x", "axes"}, {"y"}, {{"keepdims", Attribute::of_int(keep)}})},
          {in("x", {2, 3, 4}, 1), axes}, "y", {"x"}, 17, decl);
    // Opset 11: axes attribute.
    check_gradients(
        {node("ReduceSum", {"x"}, {"y"},
              {{"keepdims", Attribute::of_int(keep)}, {"axes", Attribute::of_ints({1})}})},
        {in("x", {2, 3, 4}, 1)}, "y", {"x"}, 11);
    // Every axis.
    check_gradients({node("ReduceSum", {"x"}, {"y"}, {{"keepdims", Attribute::of_int(keep)}})},
                    {in("x", {2, 3}, 1)}, "y", {"x"}, 17, Decl::None);
    // Axes fed at run time.
    check_gradients(
        {node("ReduceSum", {"x", "axes"}, {"y"}, {{"keepdims", Attribute::of_int(keep)}})},
        {in("x", {2, 3, 4}, 1), {"axes", Tensor::from_vector<int64_t>({1}, {-2})}}, "y", {"x"}, 17,
        Decl::None);
  }
}

DPRUN_GRADIENT_CASE(ReduceMean, ReduceMeanCases) {
  for (int keep = 0; keep < 2; ++keep) {
    SCOPED_TRACE("keepdims " + std::to_string(keep));
    check_gradients(
        {node("ReduceMean", {"x"}, {"y"},
              {{"keepdims", Attribute::of_int(keep)}, {"axes", Attribute::of_ints({0, 2})}})},
        {in("x", {2, 3, 4}, 1)}, "y", {"x"}, 17, Decl::Symbolic);
    check_gradients({node("ReduceMean", {"x"}, {"y"}, {{"keepdims", Attribute::of_int(keep)}})},
                    {in("x", {2, 3}, 1)}, "y", {"x"}, 12);
    Input axes{"axes", Tensor::from_vector<int64_t>({1}, {1}), true};
    check_gradients(
        {node("ReduceMean", {"x", "axes"}, {"y"}, {{"keepdims", Attribute::of_int(keep)}})},
        {in("x", {2, 3, 4}, 1), axes}, "y", {"x"}, 18, Decl::Full);
  }
}

void check_softmax_family(const char* op) {
  // Opset 13: one axis.
  check_gradients({node(op, {"x"}, {"y"}, {{"axis", Attribute::of_int(1)}})},
                  {in("x", {2, 3, 4}, 1)}, "y", {"x"}, 13, Decl::None);
  check_gradients({node(op, {"x"}, {"y"})}, {in("x", {2, 3, 4}, 1)}, "y", {"x"}, 17, Decl::Full);
  // Opset 11: coerced to 2-D at axis.
  check_gradients({node(op, {"x"}, {"y"}, {{"axis", Attribute::of_int(1)}})},
                  {in("x", {2, 3, 4}, 1)}, "y", {"x"}, 11, Decl::Full);
  check_gradients({node(op, {"x"}, {"y"})}, {in("x", {2, 3, 4}, 1)}, "y", {"x"}, 11, Decl::Full);
}

DPRUN_GRADIENT_CASE(Softmax, SoftmaxAxes) {
  check_softmax_family("Softmax");
}
DPRUN_GRADIENT_CASE(LogSoftmax, LogSoftmaxAxes) {
  check_softmax_family("LogSoftmax");
}

DPRUN_GRADIENT_CASE(Conv, ConvCases) {
  // 2-D with stride, asymmetric pads and dilation; the stride leaves input rows unused.
  auto n = node("Conv", {"x", "w", "b"}, {"y"},
                {{"strides", Attribute::of_ints({2, 1})},
                 {"pads", Attribute::of_ints({1, 0, 0, 1})},
                 {"dilations", Attribute::of_ints({1, 2})}});
  check_gradients({n}, {in("x", {1, 2, 6, 5}, 1), in("w", {3, 2, 3, 2}, 2), in("b", {3}, 3)}, "y",
                  {"x", "w", "b"}, 17, Decl::Full);
  check_gradients({n}, {in("x", {1, 2, 6, 5}, 1), in("w", {3, 2, 3, 2}, 2), in("b", {3}, 3)}, "y",
                  {"x", "w", "b"}, 9, Decl::Full);
  // 1-D.
  check_gradients({node("Conv", {"x", "w"}, {"y"}, {{"strides", Attribute::of_ints({3})}})},
                  {in("x", {1, 2, 8}, 1), in("w", {3, 2, 2}, 2)}, "y", {"x", "w"}, 17, Decl::Full);
  // Grouped: input gradient only.
  check_gradients({node("Conv", {"x", "w"}, {"y"}, {{"group", Attribute::of_int(2)}})},
                  {in("x", {1, 4, 4, 4}, 1), in("w", {4, 2, 3, 3}, 2)}, "y", {"x"}, 17, Decl::Full);
}

DPRUN_GRADIENT_CASE(Conv, ConvSymbolicShapes) {
  // A dynamic batch (as PyTorch exports it): the static spatial sizes still give exact
  // ConvTranspose attributes, at every opset.
  auto n = node("Conv", {"x", "w", "b"}, {"y"},
                {{"strides", Attribute::of_ints({2, 1})},
                 {"pads", Attribute::of_ints({1, 0, 0, 1})},
                 {"dilations", Attribute::of_ints({1, 2})}});
  std::vector<Input> inputs = {in("x", {3, 2, 6, 5}, 1), in("w", {3, 2, 3, 2}, 2), in("b", {3}, 3)};
  for (int64_t opset : {9, 17})
    check_gradients({n}, inputs, "y", {"x", "w", "b"}, opset, Decl::Batch);
  // Every dim symbolic: X's size and the kernel's are read at run time. Strides 2 and 3 leave
  // input rows unused, which dX must give back as zeros.
  check_gradients({n}, inputs, "y", {"x", "w", "b"}, 17, Decl::Symbolic);
  check_gradients(
      {node("Conv", {"x", "w"}, {"y"},
            {{"strides", Attribute::of_ints({3})}, {"pads", Attribute::of_ints({2, 0})}})},
      {in("x", {2, 2, 9}, 1), in("w", {3, 2, 2}, 2)}, "y", {"x", "w"}, 17, Decl::Symbolic);
  // No shapes at all: the kernel from kernel_shape, the spatial sizes at run time.
  check_gradients(
      {node(
          "Conv", {"x", "w"}, {"y"},
          {{"kernel_shape", Attribute::of_ints({3, 2})}, {"strides", Attribute::of_ints({2, 2})}})},
      {in("x", {2, 2, 6, 5}, 1), in("w", {3, 2, 3, 2}, 2)}, "y", {"x", "w"}, 17, Decl::None);
}

TEST(GradientRules, ConvRunTimeSizesNeedOpset10) {
  auto g = make_graph({node("Conv", {"x", "w"}, {"y"})},
                      {in("x", {1, 2, 4, 4}, 1), in("w", {3, 2, 3, 3}, 2)}, "y", 9, Decl::Symbolic);
  try {
    build_gradient(*g, GradientSpec{{"x"}, "y"});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "[Conv] node 'Conv_fwd': gradient: at ai.onnx opset 9 the gradient needs static "
                 "spatial sizes of X and W (run-time sizes need opset >= 10)");
  }
}

// ---- squeeze, unsqueeze, sum ----

DPRUN_GRADIENT_CASE(Squeeze, SqueezeAxes) {
  // Opset 13+: axes as an input; opset 11: attribute; no axes: every 1-sized dim.
  Input axes{"axes", Tensor::from_vector<int64_t>({2}, {0, -1}), true};
  check_all_ways({node("Squeeze", {"x", "axes"}, {"y"})}, {in("x", {1, 3, 1}, 1), axes}, "y", {"x"},
                 true);
  check_gradients({node("Squeeze", {"x"}, {"y"}, {{"axes", Attribute::of_ints({2})}})},
                  {in("x", {2, 3, 1}, 2)}, "y", {"x"}, 11, Decl::Full);
  check_gradients({node("Squeeze", {"x"}, {"y"})}, {in("x", {1, 3, 1, 2}, 3)}, "y", {"x"}, 17,
                  Decl::Full);
}

DPRUN_GRADIENT_CASE(Unsqueeze, UnsqueezeAxes) {
  // Axes as an input from opset 13 only (check_all_ways would also run opset 12).
  Input axes{"axes", Tensor::from_vector<int64_t>({2}, {0, 3}), true};
  for (Decl decl : {Decl::Full, Decl::Symbolic})
    check_gradients({node("Unsqueeze", {"x", "axes"}, {"y"})}, {in("x", {2, 3}, 1), axes}, "y",
                    {"x"}, 17, decl);
  check_gradients({node("Unsqueeze", {"x"}, {"y"}, {{"axes", Attribute::of_ints({1})}})},
                  {in("x", {2, 3}, 2)}, "y", {"x"}, 11, Decl::Full);
}

DPRUN_GRADIENT_CASE(Sum, SumBroadcast) {
  // Three inputs, two of them broadcast; one input used twice.
  check_all_ways({node("Sum", {"a", "b", "c"}, {"y"})},
                 {in("a", {2, 3}, 1), in("b", {3}, 2), in("c", {2, 1}, 3)}, "y", {"a", "b", "c"});
  check_all_ways({node("Sum", {"a", "a"}, {"y"})}, {in("a", {2, 3}, 4)}, "y", {"a"});
  check_gradients({node("Sum", {"a"}, {"y"})}, {in("a", {4}, 5)}, "y", {"a"}, 17, Decl::Full);
}

}  // namespace
}  // namespace dprun
