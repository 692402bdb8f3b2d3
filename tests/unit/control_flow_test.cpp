// If, Loop and Scan with hand-built subgraphs, including outer-scope values and nesting.
#include <gtest/gtest.h>

#include "engine/plan.h"
#include "graph_test_util.h"

namespace dprun {
namespace {

using testing::constant_node;
using testing::graph_attr;
using testing::make_graph;
using testing::make_node;
using testing::run_graph;
using testing::values_of;

Tensor f32(Shape shape, std::vector<float> v) {
  return Tensor::from_vector<float>(shape, v);
}

// then: out = x + outer; else: out = constant [10, 20].
std::shared_ptr<Graph> if_graph() {
  auto then_g = make_graph({make_node("Add", {"x", "outer"}, {"t"})}, {}, {"t"});
  auto else_g = make_graph({constant_node("e", f32({2}, {10, 20}))}, {}, {"e"});
  Node n = make_node("If", {"cond"}, {"y"});
  n.attributes["then_branch"] = graph_attr(then_g);
  n.attributes["else_branch"] = graph_attr(else_g);
  return make_graph({n}, {{"cond", DType::Bool}, {"x", DType::Float32}, {"outer", DType::Float32}},
                    {"y"});
}

TEST(If, RunsTheChosenBranchWithOuterValues) {
  Tensor x = f32({2}, {1, 2}), outer = f32({2}, {100, 200});
  auto out = run_graph(if_graph(), {Tensor::scalar<bool>(true), x, outer}, 13);
  EXPECT_EQ(values_of<float>(out[0]), (std::vector<float>{101, 202}));
  out = run_graph(if_graph(), {Tensor::scalar<bool>(false), x, outer}, 13);
  EXPECT_EQ(values_of<float>(out[0]), (std::vector<float>{10, 20}));
  EXPECT_THROW(run_graph(if_graph(), {Tensor::scalar<float>(1), x, outer}, 13), Error);
}

TEST(If, ImplicitInputsAreTheFreeVariables) {
  auto g = if_graph();
  EXPECT_EQ(implicit_inputs(g->nodes[0]), (std::vector<std::string>{"x", "outer"}));
  g->opset_imports[""] = 13;
  auto plan = Plan::build(g, DeviceType::CPU);
  EXPECT_EQ(plan->steps()[0].implicit_inputs, (std::vector<std::string>{"x", "outer"}));
  EXPECT_EQ(plan->steps()[0].inputs.size(), 3u);
}

TEST(If, BranchOutputCountMustMatch) {
  auto g = if_graph();
  g->nodes[0].outputs.push_back("extra");
  g->opset_imports[""] = 13;
  EXPECT_THROW(Model(g, Device::cpu()), Error);
}

// Loop body: (i, cond, acc) -> (cond', acc + step * i, acc'), cond' = (i < limit) where step
// and limit are outer values.
std::shared_ptr<Graph> loop_graph(bool with_m, bool with_cond) {
  auto body = make_graph(
      {make_node("Cast", {"i"}, {"fi"}), make_node("Mul", {"fi", "step"}, {"inc"}),
       make_node("Add", {"acc", "inc"}, {"acc_out"}), make_node("Identity", {"acc_out"}, {"scan"}),
       make_node("Less", {"i", "limit"}, {"cond_out"})},
      {{"i", DType::Int64}, {"cond", DType::Bool}, {"acc", DType::Float32}},
      {"cond_out", "acc_out", "scan"});
  body->nodes[0].attributes["to"] = Attribute::of_int(1);
  Node n = make_node("Loop", {with_m ? "m" : "", with_cond ? "c" : "", "init"}, {"final", "all"});
  n.attributes["body"] = graph_attr(body);
  return make_graph({n},
                    {{"m", DType::Int64},
                     {"c", DType::Bool},
                     {"init", DType::Float32},
                     {"step", DType::Float32},
                     {"limit", DType::Int64}},
                    {"final", "all"});
}

TEST(Loop, TripCountBoundsIterationsAndScanOutputsStack) {
  // limit large: stops after M = 3 iterations; acc = 1 + 2*(0+1+2) = 7.
  auto out = run_graph(loop_graph(true, true),
                       {Tensor::scalar<int64_t>(3), Tensor::scalar<bool>(true), f32({1}, {1}),
                        f32({1}, {2}), Tensor::scalar<int64_t>(100)},
                       13);
  EXPECT_EQ(values_of<float>(out[0]), (std::vector<float>{7}));
  EXPECT_EQ(out[1].shape(), (Shape{3, 1}));
  EXPECT_EQ(values_of<float>(out[1]), (std::vector<float>{1, 3, 7}));
}

TEST(Loop, ConditionStopsTheLoop) {
  // cond_out = i < 1: iterations 0 and 1 run, then it stops; acc = 0 + 0 + 1.
  auto out = run_graph(loop_graph(true, true),
                       {Tensor::scalar<int64_t>(10), Tensor::scalar<bool>(true), f32({1}, {0}),
                        f32({1}, {1}), Tensor::scalar<int64_t>(1)},
                       13);
  EXPECT_EQ(values_of<float>(out[0]), (std::vector<float>{1}));
  EXPECT_EQ(out[1].shape(), (Shape{2, 1}));
  // An initially false condition runs no iteration: empty scan output.
  out = run_graph(loop_graph(true, true),
                  {Tensor::scalar<int64_t>(10), Tensor::scalar<bool>(false), f32({1}, {5}),
                   f32({1}, {1}), Tensor::scalar<int64_t>(1)},
                  13);
  EXPECT_EQ(values_of<float>(out[0]), (std::vector<float>{5}));
  EXPECT_EQ(out[1].numel(), 0);
  EXPECT_EQ(out[1].shape()[0], 0);
}

TEST(Loop, OmittedTripCountRunsUntilCondition) {
  auto g = loop_graph(false, true);
  auto out = run_graph(g,
                       {Tensor::scalar<int64_t>(0), Tensor::scalar<bool>(true), f32({1}, {0}),
                        f32({1}, {1}), Tensor::scalar<int64_t>(3)},
                       13);
  // i = 0..3 run (cond_out false after i = 3): acc = 0+1+2+3.
  EXPECT_EQ(values_of<float>(out[0]), (std::vector<float>{6}));
}

TEST(Loop, BodyInputCountMustMatch) {
  auto g = loop_graph(true, true);
  g->nodes[0].attributes["body"].g->inputs.pop_back();
  g->opset_imports[""] = 13;
  EXPECT_THROW(Model(g, Device::cpu()), Error);
}

TEST(Loop, CarriesASequenceAndNestsAnIfReadingTheOuterGraph) {
  // body: s' = SequenceInsert(s, If(i < 1) then a else b); a and b come from the top graph,
  // two scopes up.
  auto then_g = make_graph({make_node("Identity", {"a"}, {"ta"})}, {}, {"ta"});
  auto else_g = make_graph({make_node("Identity", {"b"}, {"tb"})}, {}, {"tb"});
  Node branch = make_node("If", {"first"}, {"picked"});
  branch.attributes["then_branch"] = graph_attr(then_g);
  branch.attributes["else_branch"] = graph_attr(else_g);
  auto body = make_graph(
      {constant_node("one", Tensor::scalar<int64_t>(1)), make_node("Less", {"i", "one"}, {"first"}),
       branch, make_node("SequenceInsert", {"s", "picked"}, {"s_out"}),
       make_node("Identity", {"cond"}, {"cond_out"})},
      {{"i", DType::Int64}, {"cond", DType::Bool}}, {"cond_out", "s_out"}, {"s"});
  Node loop = make_node("Loop", {"m", "", "empty"}, {"seq"});
  loop.attributes["body"] = graph_attr(body);
  Node cat = make_node("ConcatFromSequence", {"seq"}, {"y"});
  cat.attributes["axis"] = Attribute::of_int(0);
  auto g = make_graph({make_node("SequenceEmpty", {}, {"empty"}), loop, cat},
                      {{"m", DType::Int64}, {"a", DType::Float32}, {"b", DType::Float32}}, {"y"});
  auto out = run_graph(g, {Tensor::scalar<int64_t>(3), f32({1}, {1}), f32({2}, {2, 3})}, 13);
  EXPECT_EQ(values_of<float>(out[0]), (std::vector<float>{1, 2, 3, 2, 3}));
}

// Scan body: (sum, x) -> (sum + x, sum + x).
std::shared_ptr<Graph> sum_body() {
  return make_graph({make_node("Add", {"sum", "x"}, {"sum_out"}),
                     make_node("Identity", {"sum_out"}, {"scan_out"})},
                    {{"sum", DType::Float32}, {"x", DType::Float32}}, {"sum_out", "scan_out"});
}

TEST(Scan, Opset9SumsAlongAxesAndDirections) {
  Node n = make_node("Scan", {"init", "xs"}, {"total", "partial"});
  n.attributes["body"] = graph_attr(sum_body());
  n.attributes["num_scan_inputs"] = Attribute::of_int(1);
  auto g =
      make_graph({n}, {{"init", DType::Float32}, {"xs", DType::Float32}}, {"total", "partial"});
  Tensor xs = f32({3, 2}, {1, 2, 3, 4, 5, 6});
  auto out = run_graph(g, {f32({2}, {0, 0}), xs}, 11);
  EXPECT_EQ(values_of<float>(out[0]), (std::vector<float>{9, 12}));
  EXPECT_EQ(out[1].shape(), (Shape{3, 2}));
  EXPECT_EQ(values_of<float>(out[1]), (std::vector<float>{1, 2, 4, 6, 9, 12}));

  // Scan along axis 1 (columns of a [2, 3] input) in reverse, outputs stacked on axis 1.
  Node r = n;
  r.attributes["scan_input_axes"] = Attribute::of_ints({-1});
  r.attributes["scan_input_directions"] = Attribute::of_ints({1});
  r.attributes["scan_output_axes"] = Attribute::of_ints({1});
  auto g2 =
      make_graph({r}, {{"init", DType::Float32}, {"xs", DType::Float32}}, {"total", "partial"});
  out = run_graph(g2, {f32({2}, {0, 0}), f32({2, 3}, {1, 2, 3, 4, 5, 6})}, 11);
  EXPECT_EQ(values_of<float>(out[0]), (std::vector<float>{6, 15}));
  EXPECT_EQ(out[1].shape(), (Shape{2, 3}));
  EXPECT_EQ(values_of<float>(out[1]), (std::vector<float>{3, 5, 6, 6, 11, 15}));

  // Reversed output direction: the last iteration comes first.
  Node rev = n;
  rev.attributes["scan_output_directions"] = Attribute::of_ints({1});
  auto g3 =
      make_graph({rev}, {{"init", DType::Float32}, {"xs", DType::Float32}}, {"total", "partial"});
  out = run_graph(g3, {f32({2}, {0, 0}), xs}, 11);
  EXPECT_EQ(values_of<float>(out[1]), (std::vector<float>{9, 12, 4, 6, 1, 2}));
}

TEST(Scan, Opset8HasABatchDimension) {
  Node n = make_node("Scan", {"", "init", "xs"}, {"total", "partial"});
  n.attributes["body"] = graph_attr(sum_body());
  n.attributes["num_scan_inputs"] = Attribute::of_int(1);
  auto g =
      make_graph({n}, {{"init", DType::Float32}, {"xs", DType::Float32}}, {"total", "partial"});
  // Two batches of sequence length 2 with one-element items.
  auto out = run_graph(g, {f32({2, 1}, {0, 10}), f32({2, 2, 1}, {1, 2, 3, 4})}, 8);
  EXPECT_EQ(out[0].shape(), (Shape{2, 1}));
  EXPECT_EQ(values_of<float>(out[0]), (std::vector<float>{3, 17}));
  EXPECT_EQ(out[1].shape(), (Shape{2, 2, 1}));
  EXPECT_EQ(values_of<float>(out[1]), (std::vector<float>{1, 3, 13, 17}));
}

TEST(Scan, RejectsMismatchedLengthsAndBadAttributes) {
  auto body = make_graph({make_node("Add", {"x", "z"}, {"o"})},
                         {{"x", DType::Float32}, {"z", DType::Float32}}, {"o"});
  Node n = make_node("Scan", {"a", "b"}, {"o"});
  n.attributes["body"] = graph_attr(body);
  n.attributes["num_scan_inputs"] = Attribute::of_int(2);
  auto g = make_graph({n}, {{"a", DType::Float32}, {"b", DType::Float32}}, {"o"});
  EXPECT_THROW(run_graph(g, {f32({2}, {1, 2}), f32({3}, {1, 2, 3})}, 11), Error);
  auto out = run_graph(g, {f32({2}, {1, 2}), f32({2}, {3, 4})}, 11);
  EXPECT_EQ(values_of<float>(out[0]), (std::vector<float>{4, 6}));

  Node bad = n;
  bad.attributes["scan_input_axes"] = Attribute::of_ints({0});  // needs two entries
  auto g2 = make_graph({bad}, {{"a", DType::Float32}, {"b", DType::Float32}}, {"o"});
  EXPECT_THROW(run_graph(g2, {f32({2}, {1, 2}), f32({2}, {3, 4})}, 11), Error);
}

TEST(ControlFlow, UndefinedOuterValueIsReported) {
  auto then_g = make_graph({make_node("Identity", {"nowhere"}, {"t"})}, {}, {"t"});
  Node n = make_node("If", {"cond"}, {"y"});
  n.attributes["then_branch"] = graph_attr(then_g);
  n.attributes["else_branch"] = graph_attr(then_g);
  auto g = make_graph({n}, {{"cond", DType::Bool}}, {"y"});
  g->opset_imports[""] = 13;
  try {
    Model model(g, Device::cpu());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("nowhere"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace dprun
