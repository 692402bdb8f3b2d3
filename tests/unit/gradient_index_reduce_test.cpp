// Finite-difference cases for the gradient rules of the remaining reductions (ReduceProd,
// ReduceL1, ReduceSumSquare, ReduceLogSum, ReduceLogSumExp), CumSum, Einsum, the indexing
// family (GatherElements, GatherND, ScatterElements, ScatterND, TopK) and Trilu, plus the
// rules' refusals. tests/unit/gradient_test.cpp runs the cases through the registry.
#include <unistd.h>
#include <cstdio>

#include "error_test_util.h"
#include "gradient_check.h"
#include "loader/onnx_loader.h"

namespace dprun {
namespace {

using namespace dprun::testing;

Input constant(const std::string& name, Tensor t) {
  return {name, std::move(t), true};
}

Input int_input(const std::string& name, const Shape& shape, std::vector<int64_t> v) {
  return constant(name, Tensor::from_vector<int64_t>(shape, std::move(v)));
}

// x [3, 4] of distinct values at least 0.1 apart, so TopK picks the same elements under the
// finite-difference step.
Input distinct_3x4() {
  return {"x", Tensor::from_vector<double>(
                   {3, 4}, {0.3, -0.7, 0.9, 0.1, -0.2, 0.6, -1.0, 0.45, 0.8, -0.45, 0.2, -0.05})};
}

Attribute ints(std::vector<int64_t> v) {
  return Attribute::of_ints(std::move(v));
}
Attribute one(int64_t v) {
  return Attribute::of_int(v);
}

// The message build_gradient gives for y with respect to x.
std::string gradient_error(const std::vector<Node>& nodes, const std::vector<Input>& inputs,
                           int64_t opset, const std::vector<std::string>& xs = {"x"},
                           Decl decl = Decl::Full) {
  auto g = make_graph(nodes, inputs, "y", opset, decl);
  return error_of([&] { build_gradient(*g, GradientSpec{xs, "y"}); });
}

// The training graph of `nodes` at `opset`, typed from a run, passes the ONNX checker and shape
// inference on load: every emitted node exists at that opset with valid attributes.
void expect_valid_onnx(const std::vector<Node>& nodes, const std::vector<Input>& inputs,
                       const std::vector<std::string>& xs, int64_t opset,
                       const std::string& y = "y") {
  SCOPED_TRACE(nodes[0].op_type + " at opset " + std::to_string(opset));
  auto forward = make_graph(nodes, inputs, y, opset, Decl::Full);
  std::vector<Tensor> feeds = feeds_of(inputs);
  feeds.push_back(run_forward(forward, feeds));
  auto train = training_graph(*forward, xs);
  std::vector<Tensor> grads = Model(std::make_shared<Graph>(*train), Device::cpu()).run(feeds);
  int symbol = 0;
  train->inputs.back().type = {feeds.back().dtype(),
                               declare(feeds.back().shape(), Decl::Full, symbol)};
  for (size_t k = 0; k < grads.size(); ++k)
    train->outputs[k].type = {grads[k].dtype(), declare(grads[k].shape(), Decl::Full, symbol)};
  std::string path =
      ::testing::TempDir() + "gradient_index_reduce_" + std::to_string(::getpid()) + ".onnx";
  save_graph(*train, train->initializers, path);
  EXPECT_NO_THROW(load_graph(path));
  std::remove(path.c_str());
}

// ---- reductions ----

// Each axis alone, two axes and every axis, keepdims 0 and 1: axes as an attribute at opsets
// 12 and 17 (full and symbolic shapes), as a constant or fed input at opset 18.
void check_reduction(const char* op, const Input& x) {
  const int64_t rank = static_cast<int64_t>(x.value.rank());
  for (int keep = 0; keep < 2; ++keep) {
    SCOPED_TRACE(std::string(op) + " keepdims " + std::to_string(keep));
    for (int64_t axis = 0; axis < rank; ++axis) {
      SCOPED_TRACE("axis " + std::to_string(axis));
      auto n = node(op, {"x"}, {"y"}, {{"keepdims", one(keep)}, {"axes", ints({axis})}});
      check_gradients({n}, {x}, "y", {"x"}, 12, Decl::Full);
      check_gradients({n}, {x}, "y", {"x"}, 17, Decl::Symbolic);
      Input axes = int_input("axes", {1}, {axis});
      check_gradients({node(op, {"x", "axes"}, {"y"}, {{"keepdims", one(keep)}})}, {x, axes}, "y",
                      {"x"}, 18, Decl::Full);
    }
    // Two axes, one negative, and every axis.
    check_gradients({node(op, {"x"}, {"y"}, {{"keepdims", one(keep)}, {"axes", ints({-1, 0})}})},
                    {x}, "y", {"x"}, 17, Decl::Full);
    check_gradients({node(op, {"x"}, {"y"}, {{"keepdims", one(keep)}})}, {x}, "y", {"x"}, 17,
                    Decl::None);
    // Axes fed at run time (the rule sees no constant).
    check_gradients({node(op, {"x", "axes"}, {"y"}, {{"keepdims", one(keep)}})},
                    {x, {"axes", Tensor::from_vector<int64_t>({1}, {-2})}}, "y", {"x"}, 18,
                    Decl::None);
  }
  // noop_with_empty_axes: the node copies X.
  check_gradients({node(op, {"x"}, {"y"}, {{"noop_with_empty_axes", one(1)}})}, {x}, "y", {"x"}, 18,
                  Decl::Full);
}

DPRUN_GRADIENT_CASE(ReduceL1, ReduceL1AxesKeepdims) {
  check_reduction("ReduceL1", in("x", {2, 3, 4}, 11));
}

DPRUN_GRADIENT_CASE(ReduceSumSquare, ReduceSumSquareAxesKeepdims) {
  check_reduction("ReduceSumSquare", in("x", {2, 3, 4}, 12));
}

DPRUN_GRADIENT_CASE(ReduceLogSum, ReduceLogSumAxesKeepdims) {
  check_reduction("ReduceLogSum", in("x", {2, 3, 4}, 13, 0.2, 2.0));
}

DPRUN_GRADIENT_CASE(ReduceLogSumExp, ReduceLogSumExpAxesKeepdims) {
  check_reduction("ReduceLogSumExp", in("x", {2, 3, 4}, 14, -2.0, 2.0));
}

DPRUN_GRADIENT_CASE(ReduceProd, ReduceProdAxesKeepdims) {
  check_reduction("ReduceProd", in("x", {2, 3, 4}, 15, 0.5, 1.5));
}

DPRUN_GRADIENT_CASE(ReduceProd, ReduceProdWithZeros) {
  // Rows of x [3, 4] along axis 1: no zero, one zero, two zeros. Along axis 0 the columns hold
  // one zero or two; reducing every axis sees three zeros.
  Input x = {"x", Tensor::from_vector<double>({3, 4}, {0.5, -1.5, 2, 0.75,  //
                                                       1.25, 0, -0.5, 2,    //
                                                       0, 1.5, 0, -1.25})};
  for (int keep = 0; keep < 2; ++keep) {
    SCOPED_TRACE("keepdims " + std::to_string(keep));
    for (int64_t axis : {0, 1})
      check_gradients(
          {node("ReduceProd", {"x"}, {"y"}, {{"keepdims", one(keep)}, {"axes", ints({axis})}})},
          {x}, "y", {"x"}, 17, Decl::Full);
    check_gradients({node("ReduceProd", {"x"}, {"y"}, {{"keepdims", one(keep)}})}, {x}, "y", {"x"},
                    17, Decl::Full);
  }
  // Exactly one zero overall: its gradient is the product of the rest, the others' is 0.
  Input single = {"x", Tensor::from_vector<double>({2, 2}, {2, 0, -3, 0.5})};
  auto g = make_graph({node("ReduceProd", {"x"}, {"y"}, {{"keepdims", one(0)}})}, {single}, "y", 17,
                      Decl::Full);
  auto train = training_graph(*g, {"x"});
  Model m(train, Device::cpu());
  auto out = m.run(std::vector<Tensor>{single.value, Tensor::scalar<double>(2.0)});
  std::vector<double> expect = {0, 2 * 2 * -3 * 0.5, 0, 0};
  for (int i = 0; i < 4; ++i) EXPECT_EQ(out[0].item_as_double(i), expect[static_cast<size_t>(i)]);
}

// ---- CumSum ----

DPRUN_GRADIENT_CASE(CumSum, CumSumExclusiveReverse) {
  for (int exclusive = 0; exclusive < 2; ++exclusive)
    for (int reverse = 0; reverse < 2; ++reverse)
      for (int64_t axis : {0, -1}) {
        SCOPED_TRACE("exclusive " + std::to_string(exclusive) + " reverse " +
                     std::to_string(reverse) + " axis " + std::to_string(axis));
        auto n = node("CumSum", {"x", "axis"}, {"y"},
                      {{"exclusive", one(exclusive)}, {"reverse", one(reverse)}});
        Input a = constant("axis", Tensor::scalar<int64_t>(axis));
        check_all_ways({n}, {in("x", {3, 4}, 21), a}, "y", {"x"});
        // The axis fed at run time, as int32.
        check_gradients({n}, {in("x", {2, 3, 2}, 22), {"axis", Tensor::scalar<int32_t>(1)}}, "y",
                        {"x"}, 14, Decl::None);
      }
}

// ---- Einsum ----

void check_einsum(const std::string& equation, const std::vector<Input>& inputs,
                  const std::vector<int64_t>& opsets = {12, 17}) {
  SCOPED_TRACE(equation);
  std::vector<std::string> names;
  for (const auto& i : inputs) names.push_back(i.name);
  auto n = node("Einsum", names, {"y"}, {{"equation", Attribute::of_string(equation)}});
  for (int64_t opset : opsets)
    for (Decl decl : {Decl::Full, Decl::Symbolic, Decl::None})
      check_gradients({n}, inputs, "y", names, opset, decl);
}

DPRUN_GRADIENT_CASE(Einsum, EinsumPyTorchForms) {
  check_einsum("bij,bjk->bik", {in("a", {2, 3, 4}, 31), in("b", {2, 4, 2}, 32)});
  check_einsum("bhqd,bhkd->bhqk", {in("q", {2, 2, 3, 4}, 33), in("k", {2, 2, 2, 4}, 34)});
  check_einsum("ij->ji", {in("x", {3, 4}, 35)});
  check_einsum("i,i->", {in("a", {5}, 36), in("b", {5}, 37)});
  check_einsum("bi,bi->b", {in("a", {3, 4}, 38), in("b", {3, 4}, 39)});
  // Spaces and the implicit output ("ik").
  check_einsum("ij, jk", {in("a", {3, 4}, 40), in("b", {4, 2}, 41)});
}

DPRUN_GRADIENT_CASE(Einsum, EinsumEllipsisBroadcast) {
  // Equal batch axes; one operand without batch axes; batch axes broadcast from 1 and from
  // fewer axes (the run-time sum back to X's shape needs opset 13).
  check_einsum("...ij,...jk->...ik", {in("a", {2, 3, 4}, 42), in("b", {2, 4, 2}, 43)}, {13, 17});
  check_einsum("...ij,...jk->...ik", {in("a", {2, 3, 4}, 44), in("b", {4, 2}, 45)}, {13, 17});
  check_einsum("...ij,...jk->...ik", {in("a", {2, 1, 3, 4}, 46), in("b", {3, 4, 2}, 47)}, {13, 17});
  check_einsum("...ij,jk", {in("a", {2, 3, 4}, 48), in("b", {4, 2}, 49)}, {13});
}

DPRUN_GRADIENT_CASE(Einsum, EinsumSummedOutIndices) {
  // k only in b, j only in a: summed out of one operand alone, their gradients expanded back.
  check_einsum("ij,jk->i", {in("a", {3, 4}, 50), in("b", {4, 2}, 51)});
  check_einsum("ij->", {in("x", {3, 4}, 52)});
  check_einsum("bij,bk->bi", {in("a", {2, 3, 4}, 53), in("b", {2, 2}, 54)});
  // Three operands, and the same value twice.
  check_einsum("ij,jk,kl->il", {in("a", {2, 3}, 55), in("b", {3, 4}, 56), in("c", {4, 2}, 57)});
  for (int64_t opset : {12, 17})
    check_gradients(
        {node("Einsum", {"a", "a"}, {"y"}, {{"equation", Attribute::of_string("ij,ij->i")}})},
        {in("a", {3, 4}, 58)}, "y", {"a"}, opset);
}

TEST(GradientIndexReduce, EinsumRefusesDiagonalsAndInnerEllipsis) {
  EXPECT_EQ(
      gradient_error({node("Einsum", {"x"}, {"y"}, {{"equation", Attribute::of_string("ii->i")}})},
                     {in("x", {3, 3}, 1)}, 17),
      "[Einsum] node 'Einsum_fwd': gradient: the letter 'i' repeats within 'ii' (diagonals "
      "are not supported)");
  EXPECT_EQ(
      gradient_error(
          {node("Einsum", {"x"}, {"y"}, {{"equation", Attribute::of_string("i...j->i...j")}})},
          {in("x", {3, 2, 3}, 1)}, 17),
      "[Einsum] node 'Einsum_fwd': gradient: '...' only at the start of a term is supported, got "
      "'i...j'");
}

// ---- GatherElements and GatherND ----

DPRUN_GRADIENT_CASE(GatherElements, GatherElementsRepeatedNegative) {
  // x [3, 4]; indices [2, 3] (shorter than x outside the axis), repeated and negative.
  Input x = in("x", {3, 4}, 61);
  Input rows = int_input("i", {2, 3}, {0, -1, 2, 2, 0, -3});  // axis 0: rows
  Input cols = int_input("i", {2, 3}, {3, -1, 1, 0, 0, -4});  // axis 1: columns
  for (int64_t opset : {13, 16, 17})
    for (Decl decl : {Decl::Full, Decl::Symbolic}) {
      check_gradients({node("GatherElements", {"x", "i"}, {"y"}, {{"axis", one(0)}})}, {x, rows},
                      "y", {"x"}, opset, decl);
      check_gradients({node("GatherElements", {"x", "i"}, {"y"}, {{"axis", one(-1)}})}, {x, cols},
                      "y", {"x"}, opset, decl);
    }
  // Rank 3, the middle axis, int32 indices.
  Input mid = constant("i", Tensor::from_vector<int32_t>({2, 3, 1}, {1, 1, -1, 0, 2, 1}));
  for (int64_t opset : {11, 16})
    check_gradients({node("GatherElements", {"x", "i"}, {"y"}, {{"axis", one(1)}})},
                    {in("x", {2, 3, 2}, 62), mid}, "y", {"x"}, opset, Decl::Full);
}

DPRUN_GRADIENT_CASE(GatherND, GatherNDRepeatedNegative) {
  // Full tuples (scalars out), partial tuples (rows out), repeated and negative.
  Input x = in("x", {3, 4}, 63);
  Input full = int_input("i", {3, 2}, {0, 1, -3, 1, 2, -1});
  Input part = int_input("i", {2, 2, 1}, {2, -1, 0, 2});
  for (int64_t opset : {11, 13, 16, 17})
    for (Decl decl : {Decl::Full, Decl::Symbolic, Decl::None}) {
      check_gradients({node("GatherND", {"x", "i"}, {"y"})}, {x, full}, "y", {"x"}, opset, decl);
      check_gradients({node("GatherND", {"x", "i"}, {"y"})}, {x, part}, "y", {"x"}, opset, decl);
    }
}

DPRUN_GRADIENT_CASE(GatherND, GatherNDBatchDims) {
  // batch_dims 1: x [2, 3, 4], one tuple of 1 per batch row twice (repeated in batch 1).
  auto n1 = node("GatherND", {"x", "i"}, {"y"}, {{"batch_dims", one(1)}});
  Input x = in("x", {2, 3, 4}, 64);
  for (int64_t opset : {13, 16, 17})
    for (Decl decl : {Decl::Full, Decl::Symbolic, Decl::None}) {
      check_gradients({n1}, {x, int_input("i", {2, 2, 1}, {0, -1, 1, 1})}, "y", {"x"}, opset, decl);
      check_gradients({n1}, {x, int_input("i", {2, 2}, {1, -1, 0, 3})}, "y", {"x"}, opset, decl);
      check_gradients({n1}, {x, int_input("i", {2, 1}, {2, 0})}, "y", {"x"}, opset, decl);
    }
  // batch_dims 2: x [2, 2, 3, 2], indices [2, 2, 2, 1].
  auto n2 = node("GatherND", {"x", "i"}, {"y"}, {{"batch_dims", one(2)}});
  for (int64_t opset : {12, 17})
    check_gradients(
        {n2}, {in("x", {2, 2, 3, 2}, 65), int_input("i", {2, 2, 2, 1}, {0, 2, 1, 1, -1, 0, 2, 2})},
        "y", {"x"}, opset, Decl::Symbolic);
}

TEST(GradientIndexReduce, GatherNDBeforeOpset16NeedsTheTupleLength) {
  // Indices fed with symbolic dims: the tuple length k is unknown when the graph is built.
  Input idx = {"i", Tensor::from_vector<int64_t>({1, 2}, {0, 1})};
  EXPECT_EQ(gradient_error({node("GatherND", {"x", "i"}, {"y"})}, {in("x", {3, 4}, 1), idx}, 13,
                           {"x"}, Decl::Symbolic),
            "[GatherND] node 'GatherND_fwd': gradient: before ai.onnx opset 16 the gradient needs "
            "the indices' last dim known when the graph is built");
}

// ---- ScatterElements and ScatterND ----

DPRUN_GRADIENT_CASE(ScatterElements, ScatterElementsNoneAndAdd) {
  // data [3, 4]; updates [2, 3] along axis 0 with a repeated (0 at [0, 0] and [1, 0]) and a
  // negative index; along axis 1 with -1 and 3 naming one column twice in row 1.
  Input data = in("x", {3, 4}, 71), updates = in("u", {2, 3}, 72);
  Input rows = int_input("i", {2, 3}, {0, 1, -1, 0, 2, 1});
  Input cols = int_input("i", {2, 3}, {1, 0, 2, -1, 3, 0});
  for (const char* reduction : {"none", "add"})
    for (int64_t opset : {16, 17}) {
      SCOPED_TRACE(reduction);
      for (auto [axis, idx] : {std::pair<int64_t, Input>{0, rows}, {1, cols}})
        check_gradients(
            {node("ScatterElements", {"x", "i", "u"}, {"y"},
                  {{"axis", one(axis)}, {"reduction", Attribute::of_string(reduction)}})},
            {data, idx, updates}, "y", {"x", "u"}, opset, Decl::Full);
    }
  // Before opset 16 there is no reduction attribute; symbolic shapes.
  check_gradients({node("ScatterElements", {"x", "i", "u"}, {"y"}, {{"axis", one(0)}})},
                  {data, rows, updates}, "y", {"x", "u"}, 11, Decl::Symbolic);
  check_gradients({node("ScatterElements", {"x", "i", "u"}, {"y"}, {{"axis", one(1)}})},
                  {data, cols, updates}, "y", {"x", "u"}, 13, Decl::None);
}

DPRUN_GRADIENT_CASE(ScatterND, ScatterNDNoneAndAdd) {
  // data [3, 4]: rows written (tuples of 1; row 2 twice, once as -1) and elements written
  // (tuples of 2; [0, 1] twice).
  Input data = in("x", {3, 4}, 73);
  Input row_idx = int_input("i", {3, 1}, {2, 0, -1});
  Input elem_idx = int_input("i", {4, 2}, {0, 1, 2, 3, -3, 1, 1, -2});
  for (const char* reduction : {"none", "add"})
    for (int64_t opset : {16, 18}) {
      SCOPED_TRACE(reduction);
      auto n = node("ScatterND", {"x", "i", "u"}, {"y"},
                    {{"reduction", Attribute::of_string(reduction)}});
      check_gradients({n}, {data, row_idx, in("u", {3, 4}, 74)}, "y", {"x", "u"}, opset,
                      Decl::Full);
      check_gradients({n}, {data, elem_idx, in("u", {4}, 75)}, "y", {"x", "u"}, opset,
                      Decl::Symbolic);
    }
  check_gradients({node("ScatterND", {"x", "i", "u"}, {"y"})}, {data, elem_idx, in("u", {4}, 75)},
                  "y", {"x", "u"}, 11, Decl::None);
}

TEST(GradientIndexReduce, ScatterRefusesMulMaxMin) {
  for (const char* op : {"ScatterElements", "ScatterND"})
    for (const char* reduction : {"mul", "max", "min"}) {
      Input idx = std::string(op) == "ScatterND" ? int_input("i", {1, 1}, {0})
                                                 : int_input("i", {1, 2}, {0, 1});
      EXPECT_EQ(gradient_error({node(op, {"x", "i", "u"}, {"y"},
                                     {{"reduction", Attribute::of_string(reduction)}})},
                               {in("x", {2, 2}, 1), idx, in("u", {1, 2}, 2)}, 18, {"x", "u"}),
                "[" + std::string(op) + "] node '" + op + "_fwd': gradient: reduction '" +
                    reduction + "' is not supported (only none and add)");
    }
}

// ---- TopK and Trilu ----

DPRUN_GRADIENT_CASE(TopK, TopKAxesLargestSmallest) {
  Input x = distinct_3x4();
  Input k = int_input("k", {1}, {2});
  for (int64_t axis : {0, -1})
    for (int largest = 0; largest < 2; ++largest) {
      SCOPED_TRACE("axis " + std::to_string(axis) + " largest " + std::to_string(largest));
      std::vector<Node> nodes = {
          node("TopK", {"x", "k"}, {"v", "i"}, {{"axis", one(axis)}, {"largest", one(largest)}})};
      for (Decl decl : {Decl::Full, Decl::Symbolic, Decl::None})
        check_gradients(nodes, {x, k}, "v", {"x"}, 17, decl);
      check_gradients(nodes, {x, k}, "v", {"x"}, 11, Decl::Full);
    }
  // Opset 10 (k input, Scatter) and opset 9 (k attribute), largest only.
  check_gradients({node("TopK", {"x", "k"}, {"v", "i"}, {{"axis", one(0)}})}, {x, k}, "v", {"x"},
                  10, Decl::Full);
  check_gradients({node("TopK", {"x"}, {"v", "i"}, {{"k", one(3)}})}, {x}, "v", {"x"}, 9,
                  Decl::Full);
}

DPRUN_GRADIENT_CASE(Trilu, TriluUpperLowerK) {
  Input x = in("x", {2, 3, 4}, 91);
  for (int upper = 0; upper < 2; ++upper) {
    for (int64_t k : {-1, 0, 2}) {
      SCOPED_TRACE("upper " + std::to_string(upper) + " k " + std::to_string(k));
      Input kk = constant("k", Tensor::scalar<int64_t>(k));
      for (Decl decl : {Decl::Full, Decl::Symbolic, Decl::None})
        check_gradients({node("Trilu", {"x", "k"}, {"y"}, {{"upper", one(upper)}})}, {x, kk}, "y",
                        {"x"}, 14, decl);
    }
    // No k input: the main diagonal.
    check_gradients({node("Trilu", {"x"}, {"y"}, {{"upper", one(upper)}})}, {in("x", {4, 3}, 92)},
                    "y", {"x"}, 17, Decl::Full);
  }
}

// ---- every rule's emitted nodes at the opsets where its form changes ----

// (The loader's ONNX stops at opset 17, so the reductions' axes inputs of opset 18 are not
// checked here.)
TEST(GradientIndexReduce, TrainingGraphsPassTheOnnxChecker) {
  Input x = in("x", {2, 3, 4}, 1, 0.5, 1.5);
  for (const char* op :
       {"ReduceProd", "ReduceL1", "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp"}) {
    expect_valid_onnx({node(op, {"x"}, {"y"}, {{"axes", ints({1})}, {"keepdims", one(0)}})}, {x},
                      {"x"}, 12);
    expect_valid_onnx({node(op, {"x"}, {"y"})}, {x}, {"x"}, 17);
  }
  expect_valid_onnx({node("CumSum", {"x", "axis"}, {"y"}, {{"reverse", one(1)}})},
                    {x, constant("axis", Tensor::scalar<int64_t>(1))}, {"x"}, 11);
  Input a = in("a", {2, 3, 4}, 2);
  for (auto [eq, b] : {std::pair<const char*, Input>{"bij,bjk->bik", in("b", {2, 4, 2}, 3)},
                       {"bij,bk->bi", in("b", {2, 2}, 3)},
                       {"...ij,...jk->...ik", in("b", {4, 2}, 3)}})
    expect_valid_onnx({node("Einsum", {"a", "b"}, {"y"}, {{"equation", Attribute::of_string(eq)}})},
                      {a, b}, {"a", "b"}, std::string(eq)[0] == '.' ? 13 : 12);
  expect_valid_onnx(
      {node("Einsum", {"a", "b"}, {"y"}, {{"equation", Attribute::of_string("i,i->")}})},
      {in("a", {3}, 4), in("b", {3}, 5)}, {"a", "b"}, 12);
  Input rows = int_input("i", {1, 3, 4}, std::vector<int64_t>(12, 1));
  for (int64_t opset : {11, 16}) {
    expect_valid_onnx({node("GatherElements", {"x", "i"}, {"y"}, {{"axis", one(1)}})}, {x, rows},
                      {"x"}, opset);
    expect_valid_onnx({node("ScatterElements", {"x", "i", "u"}, {"y"}, {{"axis", one(1)}})},
                      {x, rows, in("u", {1, 3, 4}, 4)}, {"x", "u"}, opset);
    expect_valid_onnx({node("ScatterND", {"x", "i", "u"}, {"y"})},
                      {x, int_input("i", {2, 1}, {1, 0}), in("u", {2, 3, 4}, 5)}, {"x", "u"},
                      opset);
  }
  expect_valid_onnx({node("ScatterElements", {"x", "i", "u"}, {"y"},
                          {{"reduction", Attribute::of_string("add")}})},
                    {x, rows, in("u", {1, 3, 4}, 4)}, {"x", "u"}, 16);
  for (int64_t opset : {12, 16}) {
    expect_valid_onnx({node("GatherND", {"x", "i"}, {"y"}, {{"batch_dims", one(1)}})},
                      {x, int_input("i", {2, 2, 1}, {0, 2, 1, 1})}, {"x"}, opset);
    expect_valid_onnx({node("GatherND", {"x", "i"}, {"y"})}, {x, int_input("i", {1, 2}, {1, 2})},
                      {"x"}, opset);
  }
  expect_valid_onnx({node("TopK", {"x"}, {"v", "j"}, {{"k", one(2)}})}, {x}, {"x"}, 9, "v");
  expect_valid_onnx({node("TopK", {"x", "k"}, {"v", "j"}, {{"axis", one(0)}})},
                    {x, int_input("k", {1}, {1})}, {"x"}, 11, "v");
  expect_valid_onnx({node("Trilu", {"x", "k"}, {"y"}, {{"upper", one(0)}})},
                    {x, constant("k", Tensor::scalar<int64_t>(1))}, {"x"}, 14);
}

}  // namespace
}  // namespace dprun
