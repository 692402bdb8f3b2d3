// Elementwise kernels write their output over an input that dies at their node
// (KernelContext::allocate_output_reusing), and never over memory anything else can see.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/model.h"
#include "graph_test_util.h"

namespace dprun {
namespace {

using testing::make_graph;
using testing::make_node;

Node named(Node n, const std::string& name) {
  n.name = name;
  return n;
}

/// The data pointers each node read and wrote in one run, by node name.
struct Addresses {
  std::map<std::string, std::vector<const void*>> inputs;
  std::map<std::string, const void*> output;

  RunOptions options() {
    RunOptions options;
    NodeObserver observer;
    // Pointers only: a copy of an input Tensor would share its storage and forbid the reuse.
    observer.before = [this](const Node& node, Device, std::span<const Tensor* const> in) {
      for (const Tensor* t : in) inputs[node.name].push_back(t ? t->raw_data() : nullptr);
    };
    observer.after = [this](const Node& node, Device, std::span<const Tensor> out) {
      output[node.name] = out[0].raw_data();
    };
    options.observers.push_back(observer);
    return options;
  }
};

Tensor values(Shape shape, std::vector<float> v) {
  return Tensor::from_vector(shape, v);
}

/// A model of `graph` at opset 17 on the CPU.
Model cpu_model(std::shared_ptr<Graph> graph) {
  graph->opset_imports[""] = 17;
  return Model(graph, Device::cpu());
}

TEST(OutputReuse, ElementwiseOutputsTakeTheMemoryOfInputsThatDieThere) {
  // a = -x; b = relu(a); d = c + b (c broadcast); e = d * d.
  auto graph = make_graph(
      {named(make_node("Neg", {"x"}, {"a"}), "neg"), named(make_node("Relu", {"a"}, {"b"}), "relu"),
       named(make_node("Add", {"c", "b"}, {"d"}), "add"),
       named(make_node("Mul", {"d", "d"}, {"e"}), "mul")},
      {{"x", DType::Float32}, {"c", DType::Float32}}, {"e"});
  Model model = cpu_model(graph);
  Tensor x = values({2, 3}, {1, -2, 3, -4, 5, -6});
  Tensor c = values({3}, {0.5f, 1, 2});
  Addresses seen;
  auto out = model.run(std::vector<Tensor>{x, c}, seen.options());

  EXPECT_NE(seen.output["neg"], seen.inputs["neg"][0]);          // x belongs to the caller
  EXPECT_EQ(seen.output["relu"], seen.inputs["relu"][0]);        // a dies at relu
  EXPECT_EQ(seen.output["add"], seen.inputs["add"][1]);          // b has the output's shape
  EXPECT_NE(seen.output["mul"], seen.inputs["mul"][0]);          // d is read twice by mul
  const std::vector<float> want = {0.25f, 9, 4, 20.25f, 1, 64};  // (c + relu(-x))^2
  EXPECT_EQ(testing::values_of<float>(out[0]), want);
  EXPECT_EQ(testing::values_of<float>(x), (std::vector<float>{1, -2, 3, -4, 5, -6}));
}

TEST(OutputReuse, ValuesReadLaterOrReturnedAreNotWrittenOver) {
  // a = -x; b = relu(a) (an output too); s = a + b.
  auto graph = make_graph(
      {named(make_node("Neg", {"x"}, {"a"}), "neg"), named(make_node("Relu", {"a"}, {"b"}), "relu"),
       named(make_node("Add", {"a", "b"}, {"s"}), "add")},
      {{"x", DType::Float32}}, {"s", "b"});
  Model model = cpu_model(graph);
  Addresses seen;
  auto out = model.run(std::vector<Tensor>{values({4}, {1, -2, 3, -4})}, seen.options());

  EXPECT_NE(seen.output["relu"], seen.inputs["relu"][0]);  // add still reads a
  EXPECT_EQ(seen.output["add"], seen.inputs["add"][0]);    // a dies at add
  EXPECT_NE(seen.output["add"], seen.inputs["add"][1]);    // b is a graph output
  EXPECT_EQ(testing::values_of<float>(out[0]), (std::vector<float>{-1, 4, -3, 8}));
  EXPECT_EQ(testing::values_of<float>(out[1]), (std::vector<float>{0, 2, 0, 4}));
}

TEST(OutputReuse, MemoryStillViewedByAnotherValueIsNotWrittenOver) {
  // a = -x; v = Flatten(a) shares a's memory; r = relu(a) is a's last reader; y = r + v.
  Node flatten = named(make_node("Flatten", {"a"}, {"v"}), "flatten");
  flatten.attributes["axis"].kind = Attribute::Kind::Int;
  flatten.attributes["axis"].i = 1;
  auto graph = make_graph({named(make_node("Neg", {"x"}, {"a"}), "neg"), flatten,
                           named(make_node("Relu", {"a"}, {"r"}), "relu"),
                           named(make_node("Add", {"r", "v"}, {"y"}), "add")},
                          {{"x", DType::Float32}}, {"y"});
  Model model = cpu_model(graph);
  Addresses seen;
  auto out = model.run(std::vector<Tensor>{values({2, 2}, {1, -2, 3, -4})}, seen.options());

  ASSERT_EQ(seen.output["flatten"], seen.inputs["flatten"][0]) << "Flatten is no longer a view";
  EXPECT_NE(seen.output["relu"], seen.inputs["relu"][0]);
  EXPECT_EQ(seen.output["add"], seen.inputs["add"][0]);  // r and v both die at add
  EXPECT_EQ(testing::values_of<float>(out[0]), (std::vector<float>{-1, 4, -3, 8}));
}

TEST(OutputReuse, ComparisonsAndCastsKeepTheirOwnMemory) {
  // Outputs of another dtype than the input never take its memory.
  auto graph = make_graph({named(make_node("Neg", {"x"}, {"a"}), "neg"),
                           named(make_node("Less", {"a", "z"}, {"l"}), "less")},
                          {{"x", DType::Float32}, {"z", DType::Float32}}, {"l"});
  Model model = cpu_model(graph);
  Addresses seen;
  auto out = model.run(std::vector<Tensor>{values({3}, {1, 0, -1}), values({3}, {0, 0, 0})},
                       seen.options());
  EXPECT_NE(seen.output["less"], seen.inputs["less"][0]);
  EXPECT_EQ(out[0].dtype(), DType::Bool);
  EXPECT_EQ(testing::values_of<bool>(out[0]), (std::vector<bool>{true, false, false}));
}

TEST(OutputReuse, RepeatedRunsGiveTheSameResults) {
  // Writing over dying intermediates must not leak into the next run through cached blocks.
  auto graph = make_graph(
      {named(make_node("Neg", {"x"}, {"a"}), "neg"), named(make_node("Relu", {"a"}, {"b"}), "relu"),
       named(make_node("Add", {"b", "x"}, {"y"}), "add")},
      {{"x", DType::Float32}}, {"y"});
  Model model = cpu_model(graph);
  Tensor x = values({3}, {-1, 2, -3});
  for (int run = 0; run < 4; ++run) {
    auto out = model.run(std::vector<Tensor>{x});
    EXPECT_EQ(testing::values_of<float>(out[0]), (std::vector<float>{0, 2, 0})) << run;
  }
  EXPECT_EQ(testing::values_of<float>(x), (std::vector<float>{-1, 2, -3}));
}

}  // namespace
}  // namespace dprun
