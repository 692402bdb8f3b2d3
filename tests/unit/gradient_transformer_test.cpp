// Finite-difference cases for the gradient rules transformers exported by torch.onnx.export
// need (Gather, LayerNormalization, Erf, Where, Slice, Split, Expand, Tile, Max/Min, a few
// unary ops and reductions) and for the loss ops, plus the builder's handling of
// non-differentiable paths. tests/unit/gradient_test.cpp runs the cases through the registry.
#include <cmath>
#include <limits>
#include <set>
#include <string>

#include "gradient_check.h"

namespace dprun {
namespace {

using namespace dprun::testing;

Input ints_in(const std::string& name, const Shape& shape, std::vector<int64_t> v,
              bool constant = false) {
  return {name, Tensor::from_vector<int64_t>(shape, v), constant};
}

// Runs forward + backward with the given dY and returns the gradients of `xs`.
std::vector<Tensor> run_gradients(const std::vector<Node>& nodes, const std::vector<Input>& inputs,
                                  const std::string& y, const std::vector<std::string>& xs,
                                  int64_t opset, const Tensor& dy, GradientResult* r = nullptr) {
  auto train = training_graph(*make_graph(nodes, inputs, y, opset, Decl::Full), xs, r);
  Model model(train, Device::cpu());
  std::vector<Tensor> feeds = feeds_of(inputs);
  feeds.push_back(dy);
  return model.run(feeds);
}

void expect_values(const Tensor& t, const std::vector<double>& expect, double tol = 1e-12) {
  ASSERT_EQ(t.numel(), static_cast<int64_t>(expect.size()));
  for (size_t i = 0; i < expect.size(); ++i)
    EXPECT_NEAR(t.item_as_double(static_cast<int64_t>(i)), expect[i], tol) << "element " << i;
}

bool emits(const GradientResult& r, const std::string& op) {
  for (const auto& n : r.nodes)
    if (n.op_type == op) return true;
  return false;
}

// ---- Gather ----

// Opset 13 groups repeated indices with Unique; 16+ accumulates with ScatterElements add.
const std::vector<int64_t> kGatherOpsets = {11, 13, 15, 16, 17};

DPRUN_GRADIENT_CASE(Gather, GatherEmbeddingRepeatedIndices) {
  // Token ids with repeats: rows 1 and 4 are read several times, rows 2 never.
  Input ids = ints_in("ids", {2, 3}, {1, 3, 1, 4, 1, 0});
  auto n = node("Gather", {"w", "ids"}, {"y"});
  check_all_ways({n}, {in("w", {5, 3}, 1), ids}, "y", {"w"});
  for (int64_t opset : kGatherOpsets)
    for (Decl decl : {Decl::Full, Decl::None})
      check_gradients({n}, {in("w", {5, 3}, 1), ids}, "y", {"w"}, opset, decl);
}

DPRUN_GRADIENT_CASE(Gather, GatherOtherAxesNegativeIndices) {
  // Axis 1 with -1 and 3 naming the same slice; axis -1 with repeats; a scalar index.
  Input idx = ints_in("idx", {4}, {-1, 3, 0, -1});
  Input idx2 = ints_in("idx", {2, 2}, {0, -1, 3, 3});
  Input scalar = ints_in("idx", {}, {-2});
  for (int64_t opset : kGatherOpsets) {
    check_gradients({node("Gather", {"x", "idx"}, {"y"}, {{"axis", Attribute::of_int(1)}})},
                    {in("x", {2, 4, 3}, 1), idx}, "y", {"x"}, opset, Decl::Symbolic);
    check_gradients({node("Gather", {"x", "idx"}, {"y"}, {{"axis", Attribute::of_int(-1)}})},
                    {in("x", {2, 3, 4}, 2), idx2}, "y", {"x"}, opset, Decl::None);
    check_gradients({node("Gather", {"x", "idx"}, {"y"}, {{"axis", Attribute::of_int(-2)}})},
                    {in("x", {2, 3, 4}, 3), scalar}, "y", {"x"}, opset, Decl::Full);
  }
  // int32 indices.
  Input idx32{"idx", Tensor::from_vector<int32_t>({3}, {2, -1, 2})};
  for (int64_t opset : {13, 17})
    check_gradients({node("Gather", {"x", "idx"}, {"y"})}, {in("x", {3, 2}, 4), idx32}, "y", {"x"},
                    opset, Decl::Full);
}

TEST(GradientGather, DuplicateIndicesAccumulate) {
  // x [3, 2], ids [0, 0, 2, -3] (-3 is row 0 again), dY = ones: row 0 is read three times,
  // row 1 never, row 2 once.
  std::vector<Input> inputs = {in("x", {3, 2}, 1), ints_in("ids", {4}, {0, 0, 2, -3})};
  Tensor dy = Tensor::from_vector<double>({4, 2}, std::vector<double>(8, 1.0));
  for (int64_t opset : {13, 17}) {
    SCOPED_TRACE("opset " + std::to_string(opset));
    GradientResult r;
    auto g =
        run_gradients({node("Gather", {"x", "ids"}, {"y"})}, inputs, "y", {"x"}, opset, dy, &r);
    expect_values(g[0], {3, 3, 0, 0, 1, 1});
    EXPECT_EQ(emits(r, "Unique"), opset < 16);
  }
}

// ---- LayerNormalization ----

DPRUN_GRADIENT_CASE(LayerNormalization, LayerNormLastAxis) {
  auto n = node("LayerNormalization", {"x", "scale", "b"}, {"y"});
  std::vector<Input> inputs = {in("x", {2, 3, 4}, 1), in("scale", {4}, 2), in("b", {4}, 3)};
  for (int64_t opset : {17, 18})
    for (Decl decl : {Decl::Full, Decl::Symbolic, Decl::None})
      check_gradients({n}, inputs, "y", {"x", "scale", "b"}, opset, decl);
}

DPRUN_GRADIENT_CASE(LayerNormalization, LayerNormOtherAxesNoBias) {
  // Axis 1 (two normalized axes) and axis -2, no B, a large epsilon.
  auto n = node("LayerNormalization", {"x", "scale"}, {"y"},
                {{"axis", Attribute::of_int(1)}, {"epsilon", Attribute::of_float(0.1f)}});
  check_gradients({n}, {in("x", {2, 3, 4}, 4), in("scale", {3, 4}, 5)}, "y", {"x", "scale"}, 17,
                  Decl::Symbolic);
  check_gradients({n}, {in("x", {2, 3, 4}, 4), in("scale", {3, 4}, 5)}, "y", {"x", "scale"}, 18,
                  Decl::Full);
  auto m = node("LayerNormalization", {"x", "scale"}, {"y"}, {{"axis", Attribute::of_int(-2)}});
  check_gradients({m}, {in("x", {2, 3, 4}, 6), in("scale", {3, 4}, 7)}, "y", {"x", "scale"}, 17,
                  Decl::None);
}

DPRUN_GRADIENT_CASE(LayerNormalization, LayerNormStatisticsOutputs) {
  // Mean and InvStdDev are outputs of the node: reused, and also read downstream (their
  // gradients add to dX). Then only InvStdDev is read, without Y.
  std::vector<Input> inputs = {in("x", {2, 3, 4}, 1), in("scale", {4}, 2), in("b", {4}, 3)};
  auto ln = node("LayerNormalization", {"x", "scale", "b"}, {"ln", "mean", "inv"});
  check_gradients({ln, node("Mul", {"mean", "inv"}, {"mi"}), node("Add", {"ln", "mi"}, {"y"})},
                  inputs, "y", {"x", "scale", "b"}, 17, Decl::None);
  check_gradients({ln, node("Add", {"ln", "mean"}, {"y"})}, inputs, "y", {"x", "scale", "b"}, 17,
                  Decl::Full);
  check_gradients({ln, node("Identity", {"inv"}, {"y"})}, inputs, "y", {"x"}, 17, Decl::None);
  check_gradients({ln, node("Identity", {"ln"}, {"y"})}, inputs, "y", {"x", "scale"}, 17,
                  Decl::Symbolic);
}

DPRUN_GRADIENT_CASE(LayerNormalization, LayerNormAfterComputedReshape) {
  // GPT's attention heads: a Reshape to a shape computed from Shape, Gather, Unsqueeze and
  // Concat, a LayerNormalization, then a MatMul whose rule needs its input's rank. The graph
  // carries no inferred types: the builder works the ranks out from the producers, starting
  // from x's declared rank.
  Input zero{"zero", Tensor::from_vector<int64_t>({}, {0}), true};
  Input axes{"axes", Tensor::from_vector<int64_t>({1}, {0}), true};
  Input tail{"tail", Tensor::from_vector<int64_t>({2}, {2, 3}), true};
  std::vector<Node> nodes = {
      node("Shape", {"x"}, {"dims"}),
      node("Gather", {"dims", "zero"}, {"n"}),
      node("Unsqueeze", {"n", "axes"}, {"n1"}),
      node("Concat", {"n1", "tail"}, {"shape"}, {{"axis", Attribute::of_int(0)}}),
      node("Reshape", {"x", "shape"}, {"r"}),
      node("LayerNormalization", {"r", "scale", "b"}, {"ln"}),
      node("MatMul", {"ln", "w"}, {"y"})};
  std::vector<Input> inputs = {in("x", {2, 6}, 1),
                               in("scale", {3}, 2),
                               in("b", {3}, 3),
                               in("w", {3, 4}, 4),
                               zero,
                               axes,
                               tail};
  check_gradients(nodes, inputs, "y", {"x", "scale", "b", "w"}, 17, Decl::Symbolic);
}

// ---- elementwise ----

void check_unary(const char* op, double lo = -1, double hi = 1) {
  check_all_ways({node(op, {"x"}, {"y"})}, {in("x", {3, 4}, 9, lo, hi)}, "y", {"x"});
}

DPRUN_GRADIENT_CASE(Erf, ErfRandom) {
  check_unary("Erf", -2, 2);
}
DPRUN_GRADIENT_CASE(Softplus, SoftplusRandom) {
  check_unary("Softplus", -3, 3);
}
DPRUN_GRADIENT_CASE(Sin, SinRandom) {
  check_unary("Sin", -3, 3);
}
DPRUN_GRADIENT_CASE(Cos, CosRandom) {
  check_unary("Cos", -3, 3);
}
DPRUN_GRADIENT_CASE(Reciprocal, ReciprocalAwayFromZero) {
  check_unary("Reciprocal", 0.5, 2);
  check_unary("Reciprocal", -2, -0.5);
}

Input bools(const std::string& name, const Shape& shape, std::vector<bool> v) {
  return {name, Tensor::from_vector<bool>(shape, v)};
}

DPRUN_GRADIENT_CASE(Where, WhereBroadcast) {
  // cond [2, 1, 3], X [4, 1], Y [3]: the output is [2, 4, 3].
  Input cond = bools("cond", {2, 1, 3}, {true, false, true, false, false, true});
  check_all_ways({node("Where", {"cond", "x", "y"}, {"out"})},
                 {cond, in("x", {4, 1}, 1), in("y", {3}, 2)}, "out", {"x", "y"});
  // Attention masking: Where(mask, X, -inf-like constant) with a broadcast mask.
  Input mask = bools("mask", {1, 3}, {true, true, false});
  Input fill{"fill", Tensor::scalar<double>(-30), true};
  check_all_ways({node("Where", {"mask", "x", "fill"}, {"out"})}, {mask, in("x", {2, 3}, 3), fill},
                 "out", {"x"});
}

DPRUN_GRADIENT_CASE(Max, MaxVariadicBroadcast) {
  check_all_ways({node("Max", {"a", "b", "c"}, {"y"})},
                 {in("a", {2, 3}, 1), in("b", {3}, 2), in("c", {2, 1}, 3)}, "y", {"a", "b", "c"});
  check_all_ways({node("Max", {"a"}, {"y"})}, {in("a", {2, 3}, 4)}, "y", {"a"});
}

DPRUN_GRADIENT_CASE(Min, MinBroadcast) {
  check_all_ways({node("Min", {"a", "b"}, {"y"})}, {in("a", {2, 3}, 1), in("b", {3}, 2)}, "y",
                 {"a", "b"});
}

TEST(GradientMaxMin, TiesSplitEvenly) {
  // Max(a, b) with a tie at element 1: each gets half of dY there.
  std::vector<Input> inputs = {{"a", Tensor::from_vector<double>({3}, {1, 2, 3})},
                               {"b", Tensor::from_vector<double>({3}, {0, 2, 4})}};
  Tensor dy = Tensor::from_vector<double>({3}, {10, 20, 30});
  auto g = run_gradients({node("Max", {"a", "b"}, {"y"})}, inputs, "y", {"a", "b"}, 17, dy);
  expect_values(g[0], {10, 10, 0});
  expect_values(g[1], {0, 10, 30});
  g = run_gradients({node("Min", {"a", "b"}, {"y"})}, inputs, "y", {"a", "b"}, 17, dy);
  expect_values(g[0], {0, 10, 30});
  expect_values(g[1], {10, 10, 0});
}

// ---- shape and data movement ----

DPRUN_GRADIENT_CASE(Slice, SliceInputsNegativeStepsClamping) {
  // Axis 1 read backwards from the end with step -2 (the end clamps); axis 0 with an end past
  // the dim.
  Input starts = ints_in("starts", {2}, {1, -1}, true);
  Input ends = ints_in("ends", {2}, {100, -100}, true);
  Input axes = ints_in("axes", {2}, {0, 1}, true);
  Input steps = ints_in("steps", {2}, {1, -2}, true);
  auto n = node("Slice", {"x", "starts", "ends", "axes", "steps"}, {"y"});
  check_all_ways({n}, {in("x", {4, 5}, 1), starts, ends, axes, steps}, "y", {"x"});
  check_gradients({n}, {in("x", {4, 5}, 1), starts, ends, axes, steps}, "y", {"x"}, 10, Decl::Full);
  // Bounds fed at run time; axes and steps omitted.
  Input fed_starts = ints_in("starts", {3}, {0, 1, -3});
  Input fed_ends = ints_in("ends", {3}, {1, 3, 4});
  check_gradients({node("Slice", {"x", "starts", "ends"}, {"y"})},
                  {in("x", {2, 3, 4}, 2), fed_starts, fed_ends}, "y", {"x"}, 13, Decl::None);
  // A negative axis, steps 3, and an empty slice on another axis.
  Input s2 = ints_in("starts", {2}, {0, 2}, true);
  Input e2 = ints_in("ends", {2}, {7, 2}, true);
  Input a2 = ints_in("axes", {2}, {-1, 0}, true);
  Input st2 = ints_in("steps", {2}, {3, 1}, true);
  check_gradients({node("Slice", {"x", "starts", "ends", "axes", "steps"}, {"y"})},
                  {in("x", {3, 7}, 3), s2, e2, a2, st2}, "y", {"x"}, 17, Decl::Symbolic);
}

// q, k, v = qkv[..., :d], qkv[..., d:2d], qkv[..., 2d:] as exporters write them: constant bounds,
// steps 1. From opset 10 dY is padded back in one pass (a Pad, no index tensor, no scatter);
// bounds fed at run time or other steps still scatter.
TEST(GradientSlice, ConstantUnitStepSlicesArePaddedBack) {
  const Input starts = ints_in("starts", {2}, {1, -4}, true);
  const Input ends = ints_in("ends", {2}, {3, 1000}, true);
  const Input axes = ints_in("axes", {2}, {0, -1}, true);
  const Input unit_steps = ints_in("steps", {2}, {1, 1}, true);
  const auto with_steps = node("Slice", {"x", "starts", "ends", "axes", "steps"}, {"y"});
  const auto without_steps = node("Slice", {"x", "starts", "ends", "axes"}, {"y"});
  auto ops_of = [](const std::vector<Node>& forward, const std::vector<Input>& inputs,
                   int64_t opset) {
    GradientResult r;
    training_graph(*make_graph(forward, inputs, "y", opset, Decl::Full), {"x"}, &r);
    std::multiset<std::string> ops;
    for (const Node& n : r.nodes) ops.insert(n.op_type);
    return ops;
  };
  for (int64_t opset : {10, 13, 17}) {
    SCOPED_TRACE(opset);
    const std::vector<Input> inputs = {in("x", {4, 6}, 1), starts, ends, axes, unit_steps};
    check_gradients({with_steps}, inputs, "y", {"x"}, opset, Decl::Full);
    check_gradients({without_steps}, {in("x", {4, 6}, 1), starts, ends, axes}, "y", {"x"}, opset,
                    Decl::Full);
    const auto ops = ops_of({with_steps}, inputs, opset);
    EXPECT_EQ(ops.count("Pad"), 1u);
    EXPECT_EQ(ops.count("ScatterElements") + ops.count("Scatter"), 0u);
    EXPECT_EQ(ops.count("Range"), 0u);
  }
  // A step of 2, or bounds fed at run time: the scatter.
  const Input steps_two = ints_in("steps", {2}, {1, 2}, true);
  EXPECT_EQ(ops_of({with_steps}, {in("x", {4, 6}, 1), starts, ends, axes, steps_two}, 17)
                .count("ScatterElements"),
            1u);
  EXPECT_EQ(
      ops_of({with_steps},
             {in("x", {4, 6}, 1), ints_in("starts", {2}, {1, -4}), ends, axes, unit_steps}, 17)
          .count("ScatterElements"),
      1u);
}

DPRUN_GRADIENT_CASE(Slice, SliceAttributes) {
  // Opsets 1-9: starts/ends/axes attributes, negative and out-of-range bounds.
  auto n = node("Slice", {"x"}, {"y"},
                {{"starts", Attribute::of_ints({-3, 1})},
                 {"ends", Attribute::of_ints({1000, -1})},
                 {"axes", Attribute::of_ints({1, 0})}});
  for (int64_t opset : {1, 9})
    check_gradients({n}, {in("x", {3, 5}, 1)}, "y", {"x"}, opset, Decl::Full);
  auto no_axes = node("Slice", {"x"}, {"y"},
                      {{"starts", Attribute::of_ints({1})}, {"ends", Attribute::of_ints({2})}});
  check_gradients({no_axes}, {in("x", {3, 2}, 2)}, "y", {"x"}, 9, Decl::Full);
}

DPRUN_GRADIENT_CASE(Split, SplitForms) {
  // Outputs a, b, c; b gets no gradient (zeros), a is read twice.
  auto tail = node("Concat", {"c", "a", "a"}, {"y"}, {{"axis", Attribute::of_int(1)}});
  Input sizes = ints_in("split", {3}, {2, 1, 3}, true);
  auto with_input =
      node("Split", {"x", "split"}, {"a", "b", "c"}, {{"axis", Attribute::of_int(1)}});
  for (int64_t opset : {13, 18})
    for (Decl decl : {Decl::Full, Decl::None})
      check_gradients({with_input, tail}, {in("x", {2, 6}, 1), sizes}, "y", {"x"}, opset, decl);
  // Opsets 11 and 12: split attribute, negative axis; no sizes: equal parts.
  check_gradients(
      {node("Split", {"x"}, {"a", "b", "c"},
            {{"axis", Attribute::of_int(-1)}, {"split", Attribute::of_ints({2, 1, 3})}}),
       tail},
      {in("x", {2, 6}, 2)}, "y", {"x"}, 11, Decl::Full);
  check_gradients({node("Split", {"x"}, {"a", "b", "c"}, {{"axis", Attribute::of_int(1)}}), tail},
                  {in("x", {2, 6}, 3)}, "y", {"x"}, 12, Decl::Full);
  // Opset 18: num_outputs with an uneven last part (3, 3, 1).
  check_gradients({node("Split", {"x"}, {"a", "b", "c"},
                        {{"axis", Attribute::of_int(1)}, {"num_outputs", Attribute::of_int(3)}}),
                   tail},
                  {in("x", {2, 7}, 4)}, "y", {"x"}, 18, Decl::None);
}

DPRUN_GRADIENT_CASE(Expand, ExpandBroadcast) {
  Input shape = ints_in("shape", {3}, {2, 3, 4}, true);
  check_all_ways({node("Expand", {"x", "shape"}, {"y"})}, {in("x", {3, 1}, 1), shape}, "y", {"x"});
  // The shape may be smaller than X's: X's dims win.
  Input small = ints_in("shape", {2}, {1, 4}, true);
  check_all_ways({node("Expand", {"x", "shape"}, {"y"})}, {in("x", {2, 1, 1}, 2), small}, "y",
                 {"x"});
}

DPRUN_GRADIENT_CASE(Tile, TileRepeats) {
  Input reps = ints_in("repeats", {3}, {2, 1, 3}, true);
  check_all_ways({node("Tile", {"x", "repeats"}, {"y"})}, {in("x", {2, 3, 2}, 1), reps}, "y", {"x"},
                 true);
  Input fed = ints_in("repeats", {2}, {3, 2});
  check_gradients({node("Tile", {"x", "repeats"}, {"y"})}, {in("x", {2, 3}, 2), fed}, "y", {"x"},
                  17, Decl::Symbolic);
}

// ---- reductions ----

void check_extremum_reduce(const char* op) {
  for (int keep = 0; keep < 2; ++keep) {
    SCOPED_TRACE("keepdims " + std::to_string(keep));
    check_gradients(
        {node(op, {"x"}, {"y"},
              {{"keepdims", Attribute::of_int(keep)}, {"axes", Attribute::of_ints({0, -1})}})},
        {in("x", {2, 3, 4}, 1)}, "y", {"x"}, 13, Decl::Symbolic);
    check_gradients({node(op, {"x"}, {"y"}, {{"keepdims", Attribute::of_int(keep)}})},
                    {in("x", {2, 3}, 2)}, "y", {"x"}, 12, Decl::None);
    Input axes = ints_in("axes", {1}, {1}, true);
    check_gradients({node(op, {"x", "axes"}, {"y"}, {{"keepdims", Attribute::of_int(keep)}})},
                    {in("x", {2, 3, 4}, 3), axes}, "y", {"x"}, 18, Decl::Full);
    Input fed = ints_in("axes", {1}, {-2});
    check_gradients({node(op, {"x", "axes"}, {"y"}, {{"keepdims", Attribute::of_int(keep)}})},
                    {in("x", {2, 3, 4}, 4), fed}, "y", {"x"}, 18, Decl::None);
  }
}

DPRUN_GRADIENT_CASE(ReduceMax, ReduceMaxCases) {
  check_extremum_reduce("ReduceMax");
}
DPRUN_GRADIENT_CASE(ReduceMin, ReduceMinCases) {
  check_extremum_reduce("ReduceMin");
}
DPRUN_GRADIENT_CASE(ReduceL2, ReduceL2Cases) {
  check_extremum_reduce("ReduceL2");
}

TEST(GradientReduce, MaxTiesAndZeroNorm) {
  // ReduceMax over rows [1, 3, 3] and [2, 0, 1]: the tie shares dY; ReduceL2 of a zero row
  // gives a zero gradient rather than NaN.
  std::vector<Input> inputs = {{"x", Tensor::from_vector<double>({2, 3}, {1, 3, 3, 2, 0, 1})}};
  Tensor dy = Tensor::from_vector<double>({2}, {4, 6});
  auto n = node("ReduceMax", {"x"}, {"y"},
                {{"axes", Attribute::of_ints({1})}, {"keepdims", Attribute::of_int(0)}});
  expect_values(run_gradients({n}, inputs, "y", {"x"}, 13, dy)[0], {0, 2, 2, 6, 0, 0});
  std::vector<Input> zero_row = {{"x", Tensor::from_vector<double>({2, 2}, {0, 0, 3, 4})}};
  Tensor dy2 = Tensor::from_vector<double>({2}, {1, 10});
  auto l2 = node("ReduceL2", {"x"}, {"y"},
                 {{"axes", Attribute::of_ints({1})}, {"keepdims", Attribute::of_int(0)}});
  expect_values(run_gradients({l2}, zero_row, "y", {"x"}, 13, dy2)[0], {0, 0, 6, 8});
}

// ---- loss ops ----

const char* const kReductions[] = {"none", "sum", "mean"};

// Scores [N, C] = [4, 3] and [N, C, d1, d2] = [2, 3, 2, 2], with labels and class weights.
struct LossInputs {
  std::vector<Input> flat, spatial;
};

LossInputs loss_inputs(const std::vector<int64_t>& flat_labels,
                       const std::vector<int64_t>& spatial_labels) {
  LossInputs l;
  l.flat = {in("x", {4, 3}, 1, -2, 2), ints_in("labels", {4}, flat_labels),
            in("w", {3}, 2, 0.5, 2)};
  l.spatial = {in("x", {2, 3, 2, 2}, 3, -2, 2), ints_in("labels", {2, 2, 2}, spatial_labels),
               in("w", {3}, 4, 0.5, 2)};
  return l;
}

void check_loss(const char* op, const std::vector<std::string>& outputs,
                const std::vector<Node>& tail, const std::string& y) {
  LossInputs plain = loss_inputs({0, 2, 1, 2}, {0, 1, 2, 2, 1, 0, 0, 2});
  // Label 1 ignored, and an ignore_index outside the classes.
  LossInputs ignoring = loss_inputs({0, 1, 1, 2}, {1, 1, 2, 0, 1, 0, 2, 2});
  LossInputs outside = loss_inputs({0, -100, 1, 2}, {-100, 1, 2, 0, 1, -100, 2, 2});
  for (const char* reduction : kReductions)
    for (bool weighted : {false, true})
      for (int ignore : {0, 1, 2}) {
        SCOPED_TRACE(std::string(reduction) + (weighted ? " weighted" : "") + " ignore " +
                     std::to_string(ignore));
        std::map<std::string, Attribute> attrs{{"reduction", Attribute::of_string(reduction)}};
        if (ignore == 1) attrs["ignore_index"] = Attribute::of_int(1);
        if (ignore == 2) attrs["ignore_index"] = Attribute::of_int(-100);
        std::vector<std::string> ins = {"x", "labels"};
        if (weighted) ins.push_back("w");
        std::vector<Node> nodes = {node(op, ins, outputs, attrs)};
        nodes.insert(nodes.end(), tail.begin(), tail.end());
        const LossInputs& l = ignore == 0 ? plain : ignore == 1 ? ignoring : outside;
        std::vector<Input> flat = l.flat, spatial = l.spatial;
        if (!weighted) flat.pop_back(), spatial.pop_back();
        check_gradients(nodes, flat, y, {"x"}, 13, Decl::None);
        check_gradients(nodes, spatial, y, {"x"}, 12, Decl::Full);
        check_gradients(nodes, spatial, y, {"x"}, 17, Decl::Symbolic);
      }
}

DPRUN_GRADIENT_CASE(NegativeLogLikelihoodLoss, NllLossReductionsWeightsIgnore) {
  check_loss("NegativeLogLikelihoodLoss", {"y"}, {}, "y");
}

DPRUN_GRADIENT_CASE(NegativeLogLikelihoodLoss, NllLossAfterLogSoftmax) {
  // The usual pair: LogSoftmax over the class axis, then NLL.
  check_gradients({node("LogSoftmax", {"x"}, {"lp"}, {{"axis", Attribute::of_int(1)}}),
                   node("NegativeLogLikelihoodLoss", {"lp", "labels"}, {"y"})},
                  {in("x", {3, 4}, 1), ints_in("labels", {3}, {3, 0, 3})}, "y", {"x"}, 13,
                  Decl::Full);
}

DPRUN_GRADIENT_CASE(SoftmaxCrossEntropyLoss, SoftmaxCrossEntropyReductionsWeightsIgnore) {
  check_loss("SoftmaxCrossEntropyLoss", {"y"}, {}, "y");
}

DPRUN_GRADIENT_CASE(SoftmaxCrossEntropyLoss, SoftmaxCrossEntropyLogProbOutput) {
  // log_prob read downstream as well as the loss, then log_prob alone.
  Input c{"c", random_tensor({3, 1}, -1, 1, 9), true};
  std::vector<Input> inputs = {in("x", {2, 3, 2}, 1), ints_in("labels", {2, 2}, {0, 2, 1, 2}), c};
  for (int ignore = 0; ignore < 2; ++ignore) {
    std::map<std::string, Attribute> attrs;
    if (ignore) attrs["ignore_index"] = Attribute::of_int(2);
    auto sce = node("SoftmaxCrossEntropyLoss", {"x", "labels"}, {"loss", "lp"}, attrs);
    std::vector<Node> both = {
        sce, node("Mul", {"lp", "c"}, {"lpc"}),
        node("ReduceSum", {"lpc"}, {"s"}, {{"keepdims", Attribute::of_int(0)}}),
        node("Add", {"loss", "s"}, {"y"})};
    check_gradients(both, inputs, "y", {"x"}, 13, Decl::Full);
    check_gradients({sce, node("Mul", {"lp", "lp"}, {"y"})}, inputs, "y", {"x"}, 13, Decl::None);
  }
}

TEST(GradientLoss, SoftmaxCrossEntropyHandComputed) {
  // Scores row 0 = [0, 0, 0]: softmax [1/3, 1/3, 1/3], label 0. Row 1 = [0, ln 3, 0]:
  // softmax [1/5, 3/5, 1/5], label 1. dLoss = 1.
  // Mean, no weights: dScores = (softmax - onehot) / 2
  //   = [[-1/3, 1/6, 1/6], [1/10, -1/5, 1/10]].
  // Mean, weights [2, 1, 1]: the sample weights are 2 and 1, the mean divides by 3:
  //   row 0 = 2 * [-2/3, 1/3, 1/3] / 3 = [-4/9, 2/9, 2/9],
  //   row 1 = 1 * [1/5, -2/5, 1/5] / 3 = [1/15, -2/15, 1/15].
  // Sum with weights: rows 0 and 1 times 2 and 1 = [[-4/3, 2/3, 2/3], [1/5, -2/5, 1/5]].
  Tensor x = Tensor::from_vector<double>({2, 3}, {0, 0, 0, 0, std::log(3.0), 0});
  std::vector<Input> base = {{"x", x}, ints_in("labels", {2}, {0, 1})};
  std::vector<Input> weighted = base;
  weighted.push_back({"w", Tensor::from_vector<double>({3}, {2, 1, 1})});
  Tensor one = Tensor::scalar<double>(1.0);
  auto sce = [](std::vector<std::string> ins, const char* reduction) {
    return node("SoftmaxCrossEntropyLoss", std::move(ins), {"y"},
                {{"reduction", Attribute::of_string(reduction)}});
  };
  for (int64_t opset : {12, 13}) {
    SCOPED_TRACE("opset " + std::to_string(opset));
    expect_values(run_gradients({sce({"x", "labels"}, "mean")}, base, "y", {"x"}, opset, one)[0],
                  {-1.0 / 3, 1.0 / 6, 1.0 / 6, 1.0 / 10, -1.0 / 5, 1.0 / 10});
    expect_values(
        run_gradients({sce({"x", "labels", "w"}, "mean")}, weighted, "y", {"x"}, opset, one)[0],
        {-4.0 / 9, 2.0 / 9, 2.0 / 9, 1.0 / 15, -2.0 / 15, 1.0 / 15});
    expect_values(
        run_gradients({sce({"x", "labels", "w"}, "sum")}, weighted, "y", {"x"}, opset, one)[0],
        {-4.0 / 3, 2.0 / 3, 2.0 / 3, 1.0 / 5, -2.0 / 5, 1.0 / 5});
  }
  // NLL on the same values as log-probabilities, sum: -1 at each label, times dLoss = 1.
  auto nll = node("NegativeLogLikelihoodLoss", {"x", "labels"}, {"y"},
                  {{"reduction", Attribute::of_string("sum")}});
  expect_values(run_gradients({nll}, base, "y", {"x"}, 13, one)[0], {-1, 0, 0, 0, -1, 0});
}

// ---- the builder on non-differentiable paths ----

TEST(GradientBuilder, ShapeChainsAndMasksCutThePath) {
  // What torch exports for attention-style code, with no value types declared:
  //   pos = Range(0, x.shape[2]); mask = pos == 2           (Shape, Gather, Range, Equal)
  //   p = softmax(where(mask, -1e9, x), -1)
  //   v = p.view(x.shape[0], -1, 2, 2)                       (Shape, Gather, Concat, Reshape)
  //   y = v / floor(float(x.shape[1])) * float(argmax(x))   (Cast, Floor, ArgMax: cut paths)
  // ArgMax has no gradient rule and Floor reads only x's shape; only Where, Softmax, Reshape,
  // Div, Mul need one.
  auto c = [](const std::string& name, Tensor t) {
    Node n = node("Constant", {}, {name}, {{"value", Attribute::of_tensor(std::move(t))}});
    n.name = "const_" + name;
    return n;
  };
  auto scalar = [](int64_t v) { return Tensor::scalar<int64_t>(v); };
  auto vec = [](std::vector<int64_t> v) {
    return Tensor::from_vector<int64_t>({static_cast<int64_t>(v.size())}, v);
  };
  std::vector<Node> nodes = {
      c("i0", scalar(0)),
      c("i1", scalar(1)),
      c("i2", scalar(2)),
      c("ax0", vec({0})),
      c("dims_tail", vec({-1, 2, 2})),
      c("fill", Tensor::scalar<double>(-1e9)),
      node("Shape", {"x"}, {"s"}),
      node("Gather", {"s", "i2"}, {"len"}),
      node("Range", {"i0", "len", "i1"}, {"pos"}),
      node("Equal", {"pos", "i2"}, {"mask"}),
      node("Where", {"mask", "fill", "x"}, {"w"}),
      node("Softmax", {"w"}, {"p"}, {{"axis", Attribute::of_int(-1)}}),
      node("Gather", {"s", "i0"}, {"b"}),
      node("Unsqueeze", {"b", "ax0"}, {"b1"}),
      node("Concat", {"b1", "dims_tail"}, {"view"}, {{"axis", Attribute::of_int(0)}}),
      node("Reshape", {"p", "view"}, {"v"}),
      node("Gather", {"s", "i1"}, {"seq"}),
      node("Cast", {"seq"}, {"seqf"}, {{"to", Attribute::of_int(int64_t(DType::Float64))}}),
      node("Floor", {"seqf"}, {"scale"}),
      node("Div", {"v", "scale"}, {"vs"}),
      node("ArgMax", {"x"}, {"am"},
           {{"axis", Attribute::of_int(0)}, {"keepdims", Attribute::of_int(0)}}),
      node("Cast", {"am"}, {"amf"}, {{"to", Attribute::of_int(int64_t(DType::Float64))}}),
      node("ReduceSum", {"amf"}, {"amsum"}, {{"keepdims", Attribute::of_int(0)}}),
      node("Mul", {"vs", "amsum"}, {"y"})};
  for (auto& n : nodes) n.name = n.outputs[0] + "_fwd";
  std::vector<Input> inputs = {in("x", {2, 3, 4}, 1)};
  for (int64_t opset : {13, 17})
    for (Decl decl : {Decl::None, Decl::Full}) {
      check_gradients(nodes, inputs, "y", {"x"}, opset, decl);
      GradientResult r;
      training_graph(*make_graph(nodes, inputs, "y", opset, decl), {"x"}, &r);
      for (const auto& n : r.nodes)
        for (const char* cut : {"s_fwd", "len_fwd", "mask_fwd", "view_fwd", "scale_fwd", "seqf_fwd",
                                "am_fwd", "amf_fwd", "amsum_fwd"})
          EXPECT_NE(n.name.rfind(std::string("grad/") + cut + "/", 0), 0u) << n.name;
    }
}

TEST(GradientBuilder, IntegerInputsGetNoGradient) {
  // Gather's indices computed from x (argmax) and Expand's shape from Shape(x): neither is
  // differentiated, and an integer x gets zeros.
  std::vector<Node> nodes = {
      node("ArgMax", {"x"}, {"idx"},
           {{"axis", Attribute::of_int(1)}, {"keepdims", Attribute::of_int(0)}}),
      node("Gather", {"x", "idx"}, {"g"}), node("Shape", {"g"}, {"gs"}),
      node("Expand", {"x", "gs"}, {"e"}), node("Add", {"g", "e"}, {"y"})};
  std::vector<Input> inputs = {in("x", {3, 3}, 1)};
  check_gradients(nodes, inputs, "y", {"x"}, 17, Decl::None);
  // With the integer idx as an x too: it gets int64 zeros.
  auto g = make_graph(nodes, inputs, "y", 17, Decl::None);
  auto r = build_gradient(*g, GradientSpec{{"x", "idx"}, "y"});
  g->nodes.insert(g->nodes.end(), r.nodes.begin(), r.nodes.end());
  g->outputs = {{r.gradients[1], {}}};
  Tensor zeros = Model(g, Device::cpu()).run(feeds_of(inputs))[0];
  EXPECT_EQ(zeros.dtype(), DType::Int64);
  EXPECT_EQ(zeros.shape(), (Shape{3}));
  for (int64_t i = 0; i < zeros.numel(); ++i) EXPECT_EQ(zeros.item_as_double(i), 0.0);
}

}  // namespace
}  // namespace dprun
