// Sequence ops and the Optional family, run as small graphs (sequences live inside the graph;
// its inputs and outputs are tensors).
#include <gtest/gtest.h>

#include "graph_test_util.h"

namespace dprun {
namespace {

using testing::make_graph;
using testing::make_node;
using testing::run_graph;
using testing::values_of;

Tensor f32(Shape shape, std::vector<float> v) {
  return Tensor::from_vector<float>(shape, v);
}
Tensor i64(int64_t v) {
  return Tensor::scalar<int64_t>(v);
}

// seq = SequenceConstruct(a, b, c); then `tail` nodes read "seq".
std::vector<Tensor> run_on_abc(std::vector<Node> tail, std::vector<std::string> outputs,
                               std::vector<std::pair<std::string, DType>> extra_inputs = {},
                               std::vector<Tensor> extra_feeds = {}) {
  std::vector<Node> nodes = {make_node("SequenceConstruct", {"a", "b", "c"}, {"seq"})};
  for (auto& n : tail) nodes.push_back(std::move(n));
  std::vector<std::pair<std::string, DType>> inputs = {
      {"a", DType::Float32}, {"b", DType::Float32}, {"c", DType::Float32}};
  for (auto& in : extra_inputs) inputs.push_back(in);
  std::vector<Tensor> feeds = {f32({2}, {1, 2}), f32({2}, {3, 4}), f32({2}, {5, 6})};
  for (auto& t : extra_feeds) feeds.push_back(t);
  return run_graph(make_graph(std::move(nodes), inputs, outputs), feeds, 12);
}

TEST(Sequence, ConstructAtAndLength) {
  auto out = run_on_abc(
      {make_node("SequenceAt", {"seq", "p"}, {"x"}), make_node("SequenceLength", {"seq"}, {"n"})},
      {"x", "n"}, {{"p", DType::Int64}}, {i64(-1)});
  EXPECT_EQ(values_of<float>(out[0]), (std::vector<float>{5, 6}));
  EXPECT_EQ(out[1].shape(), Shape{});
  EXPECT_EQ(out[1].data<int64_t>()[0], 3);
}

TEST(Sequence, AtRejectsOutOfRangePosition) {
  EXPECT_THROW(run_on_abc({make_node("SequenceAt", {"seq", "p"}, {"x"})}, {"x"},
                          {{"p", DType::Int64}}, {i64(3)}),
               Error);
  EXPECT_THROW(run_on_abc({make_node("SequenceAt", {"seq", "p"}, {"x"})}, {"x"},
                          {{"p", DType::Int64}}, {i64(-4)}),
               Error);
}

TEST(Sequence, EmptyInsertAndErase) {
  // [] -> [a] -> [a, b] -> insert c at 0: [c, a, b] -> erase -1: [c, a] -> at 1 = a.
  std::vector<Node> nodes = {make_node("SequenceEmpty", {}, {"s0"}),
                             make_node("SequenceInsert", {"s0", "a"}, {"s1"}),
                             make_node("SequenceInsert", {"s1", "b"}, {"s2"}),
                             make_node("SequenceInsert", {"s2", "c", "zero"}, {"s3"}),
                             make_node("SequenceErase", {"s3", "minus1"}, {"s4"}),
                             make_node("SequenceAt", {"s4", "zero"}, {"first"}),
                             make_node("SequenceAt", {"s4", "one"}, {"second"}),
                             make_node("SequenceLength", {"s4"}, {"n"})};
  auto g = make_graph(nodes,
                      {{"a", DType::Float32},
                       {"b", DType::Float32},
                       {"c", DType::Float32},
                       {"zero", DType::Int64},
                       {"one", DType::Int32},
                       {"minus1", DType::Int64}},
                      {"first", "second", "n"});
  auto out = run_graph(
      g, {f32({1}, {1}), f32({1}, {2}), f32({1}, {3}), i64(0), Tensor::scalar<int32_t>(1), i64(-1)},
      11);
  EXPECT_EQ(values_of<float>(out[0]), (std::vector<float>{3}));
  EXPECT_EQ(values_of<float>(out[1]), (std::vector<float>{1}));
  EXPECT_EQ(out[2].data<int64_t>()[0], 2);
}

TEST(Sequence, InsertRejectsDtypeMismatchAndBadPosition) {
  EXPECT_THROW(run_on_abc({make_node("SequenceInsert", {"seq", "d"}, {"s"}),
                           make_node("SequenceLength", {"s"}, {"n"})},
                          {"n"}, {{"d", DType::Int64}}, {i64(1)}),
               Error);
  EXPECT_THROW(run_on_abc({make_node("SequenceInsert", {"seq", "a", "p"}, {"s"}),
                           make_node("SequenceLength", {"s"}, {"n"})},
                          {"n"}, {{"p", DType::Int64}}, {i64(5)}),
               Error);
}

TEST(Sequence, EraseOfEmptySequenceFails) {
  auto g =
      make_graph({make_node("SequenceEmpty", {}, {"s"}), make_node("SequenceErase", {"s"}, {"t"}),
                  make_node("SequenceLength", {"t"}, {"n"})},
                 {}, {"n"});
  EXPECT_THROW(run_graph(g, {}, 11), Error);
}

TEST(Sequence, ConcatFromSequenceConcatenatesAndStacks) {
  Node cat = make_node("ConcatFromSequence", {"seq"}, {"y"});
  cat.attributes["axis"] = Attribute::of_int(0);
  auto out = run_on_abc({cat}, {"y"});
  EXPECT_EQ(out[0].shape(), (Shape{6}));
  EXPECT_EQ(values_of<float>(out[0]), (std::vector<float>{1, 2, 3, 4, 5, 6}));

  Node stack = make_node("ConcatFromSequence", {"seq"}, {"y"});
  stack.attributes["axis"] = Attribute::of_int(-1);
  stack.attributes["new_axis"] = Attribute::of_int(1);
  out = run_on_abc({stack}, {"y"});
  EXPECT_EQ(out[0].shape(), (Shape{2, 3}));
  EXPECT_EQ(values_of<float>(out[0]), (std::vector<float>{1, 3, 5, 2, 4, 6}));

  Node bad = make_node("ConcatFromSequence", {"seq"}, {"y"});
  bad.attributes["axis"] = Attribute::of_int(1);
  EXPECT_THROW(run_on_abc({bad}, {"y"}), Error);
}

TEST(Sequence, SplitToSequenceVariants) {
  auto split = [](std::vector<Node> extra, std::vector<std::string> outs, Node node,
                  std::vector<Tensor> feeds, std::vector<std::pair<std::string, DType>> inputs) {
    std::vector<Node> nodes = {std::move(node)};
    for (auto& n : extra) nodes.push_back(std::move(n));
    return run_graph(make_graph(nodes, inputs, outs), feeds, 11);
  };
  Tensor x = f32({2, 3}, {0, 1, 2, 3, 4, 5});
  // No split, keepdims=0 on axis 1: three [2] tensors.
  Node n = make_node("SplitToSequence", {"x"}, {"s"});
  n.attributes["axis"] = Attribute::of_int(1);
  n.attributes["keepdims"] = Attribute::of_int(0);
  auto out =
      split({make_node("SequenceAt", {"s", "p"}, {"y"}), make_node("SequenceLength", {"s"}, {"n"})},
            {"y", "n"}, n, {x, i64(2)}, {{"x", DType::Float32}, {"p", DType::Int64}});
  EXPECT_EQ(out[0].shape(), (Shape{2}));
  EXPECT_EQ(values_of<float>(out[0]), (std::vector<float>{2, 5}));
  EXPECT_EQ(out[1].data<int64_t>()[0], 3);

  // Scalar split 2 along axis 1: sizes 2 and 1 (keepdims ignored).
  n = make_node("SplitToSequence", {"x", "k"}, {"s"});
  n.attributes["axis"] = Attribute::of_int(-1);
  out =
      split({make_node("SequenceAt", {"s", "p"}, {"y"}), make_node("SequenceLength", {"s"}, {"n"})},
            {"y", "n"}, n, {x, i64(2), i64(1)},
            {{"x", DType::Float32}, {"k", DType::Int64}, {"p", DType::Int64}});
  EXPECT_EQ(out[0].shape(), (Shape{2, 1}));
  EXPECT_EQ(values_of<float>(out[0]), (std::vector<float>{2, 5}));
  EXPECT_EQ(out[1].data<int64_t>()[0], 2);

  // 1-D split sizes [1, 1] along axis 0.
  n = make_node("SplitToSequence", {"x", "k"}, {"s"});
  out = split({make_node("SequenceAt", {"s", "p"}, {"y"})}, {"y"}, n,
              {x, Tensor::from_vector<int64_t>({2}, {1, 1}), i64(1)},
              {{"x", DType::Float32}, {"k", DType::Int64}, {"p", DType::Int64}});
  EXPECT_EQ(out[0].shape(), (Shape{1, 3}));
  EXPECT_EQ(values_of<float>(out[0]), (std::vector<float>{3, 4, 5}));

  // Sizes that do not sum to the dimension.
  n = make_node("SplitToSequence", {"x", "k"}, {"s"});
  EXPECT_THROW(split({make_node("SequenceLength", {"s"}, {"n"})}, {"n"}, n,
                     {x, Tensor::from_vector<int64_t>({2}, {1, 2})},
                     {{"x", DType::Float32}, {"k", DType::Int64}}),
               Error);
}

TEST(Sequence, TensorKernelRejectsSequenceInput) {
  EXPECT_THROW(run_on_abc({make_node("Relu", {"seq"}, {"y"})}, {"y"}), Error);
}

TEST(Sequence, SequenceAsGraphOutputIsRefused) {
  EXPECT_THROW(run_on_abc({}, {"seq"}), Error);
}

TEST(Optional, WrapsTestsAndUnwraps) {
  std::vector<Node> nodes = {make_node("Optional", {"a"}, {"oa"}),
                             make_node("Optional", {}, {"none"}),
                             make_node("OptionalHasElement", {"oa"}, {"has_a"}),
                             make_node("OptionalHasElement", {"none"}, {"has_none"}),
                             make_node("OptionalGetElement", {"oa"}, {"got"}),
                             make_node("SequenceConstruct", {"a"}, {"s"}),
                             make_node("Optional", {"s"}, {"os"}),
                             make_node("OptionalGetElement", {"os"}, {"s2"}),
                             make_node("SequenceLength", {"s2"}, {"n"})};
  auto out =
      run_graph(make_graph(nodes, {{"a", DType::Float32}}, {"has_a", "has_none", "got", "n"}),
                {f32({2}, {7, 8})}, 15);
  EXPECT_TRUE(out[0].data<bool>()[0]);
  EXPECT_FALSE(out[1].data<bool>()[0]);
  EXPECT_EQ(values_of<float>(out[2]), (std::vector<float>{7, 8}));
  EXPECT_EQ(out[3].data<int64_t>()[0], 1);

  auto bad = make_graph(
      {make_node("Optional", {}, {"none"}), make_node("OptionalGetElement", {"none"}, {"y"})}, {},
      {"y"});
  EXPECT_THROW(run_graph(bad, {}, 15), Error);
}

}  // namespace
}  // namespace dprun
