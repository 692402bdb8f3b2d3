#include <gtest/gtest.h>

#include "engine/graph.h"

namespace dprun {
namespace {

Node node(const std::string& name, const std::string& op, std::vector<std::string> in,
          std::vector<std::string> out) {
  Node n;
  n.name = name;
  n.op_type = op;
  n.inputs = std::move(in);
  n.outputs = std::move(out);
  return n;
}

// An If whose branch reads "late", produced by a node listed after the If.
TEST(Graph, TopologicalSortCountsValuesReadBySubgraphs) {
  auto branch = std::make_shared<Graph>();
  branch->nodes.push_back(node("inner", "Identity", {"late"}, {"branch_out"}));
  branch->outputs.push_back({"branch_out", {}});
  EXPECT_EQ(free_variables(*branch), (std::vector<std::string>{"late"}));

  Graph g;
  g.inputs.push_back({"x", {}});
  g.inputs.push_back({"cond", {}});
  Node cond_node = node("if", "If", {"cond"}, {"y"});
  Attribute then_branch;
  then_branch.kind = Attribute::Kind::Graph;
  then_branch.g = branch;
  cond_node.attributes["then_branch"] = then_branch;
  cond_node.attributes["else_branch"] = then_branch;
  EXPECT_EQ(implicit_inputs(cond_node), (std::vector<std::string>{"late"}));
  g.nodes.push_back(cond_node);
  g.nodes.push_back(node("producer", "Identity", {"x"}, {"late"}));
  g.sort_topologically();
  EXPECT_EQ(g.nodes[0].name, "producer");
  EXPECT_EQ(g.nodes[1].name, "if");
}

TEST(Graph, DuplicateProducerIsAnError) {
  Graph g;
  g.inputs.push_back({"x", {}});
  g.nodes.push_back(node("a", "Identity", {"x"}, {"y"}));
  g.nodes.push_back(node("b", "Identity", {"x"}, {"y"}));
  EXPECT_THROW(g.sort_topologically(), Error);
}

TEST(Graph, TypedAttributeGettersCheckKinds) {
  Node n = node("n", "Op", {}, {});
  Attribute a;
  a.kind = Attribute::Kind::Float;
  a.f = 2.5f;
  n.attributes["alpha"] = a;
  EXPECT_EQ(n.attr_float("alpha"), 2.5f);
  EXPECT_EQ(n.attr_int("missing", 7), 7);
  EXPECT_THROW(n.attr_int("alpha"), Error);
  EXPECT_THROW(n.attr_ints("missing"), Error);
}

}  // namespace
}  // namespace dprun
