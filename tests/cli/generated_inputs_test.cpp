// Generated inputs fit the model: an integer input that indexes a table (a Gather, through the
// ops that keep its values) stays below the table's rows, as a BERT token_type_ids into an
// embedding of 2 rows must; a run on generated inputs that fails says they were generated.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <set>
#include <string>

#include "cli_test_util.h"
#include "engine/graph.h"
#include "loader/npy.h"
#include "loader/onnx_loader.h"
#include "op_test_util.h"

namespace dprun::testing {
namespace {

namespace fs = std::filesystem;

const SymbolicShape kIds{Dim::named("batch"), Dim::named("seq")};

Node with_int(Node node, const std::string& key, int64_t value) {
  node.attributes[key] = Attribute::of_int(value);
  return node;
}

// token_type_ids -> Gather(type_table of 2 rows); position_ids (int32) -> Cast -> Unsqueeze ->
// Gather(pos_table of 3 rows); other_ids -> Identity: out as it came (no table).
void write_embedding_model(const fs::path& path) {
  Graph g;
  g.name = "embeddings";
  g.opset_imports[""] = 13;
  g.inputs.push_back({"token_type_ids", {DType::Int64, kIds}});
  g.inputs.push_back({"position_ids", {DType::Int32, kIds}});
  g.inputs.push_back({"other_ids", {DType::Int64, kIds}});
  g.initializers["type_table"] = random_floats({2, 4}, 1);
  g.initializers["pos_table"] = random_floats({3, 4}, 2);
  g.initializers["axes"] = Tensor::from_vector<int64_t>({1}, {1});
  g.nodes = {
      make_node("Gather", {"type_table", "token_type_ids"}, {"type_emb"}),
      with_int(make_node("Cast", {"position_ids"}, {"pos64"}), "to", 7),  // TensorProto INT64
      make_node("Unsqueeze", {"pos64", "axes"}, {"pos_wide"}),
      make_node("Gather", {"pos_table", "pos_wide"}, {"pos_emb"}),
      make_node("Identity", {"token_type_ids"}, {"types"}),
      make_node("Identity", {"position_ids"}, {"positions"}),
      make_node("Identity", {"other_ids"}, {"others"}),
  };
  g.outputs.push_back(
      {"type_emb", {DType::Float32, SymbolicShape{kIds[0], kIds[1], Dim::known(4)}}});
  g.outputs.push_back(
      {"pos_emb", {DType::Float32, SymbolicShape{kIds[0], Dim::known(1), kIds[1], Dim::known(4)}}});
  g.outputs.push_back({"types", {DType::Int64, kIds}});
  g.outputs.push_back({"positions", {DType::Int32, kIds}});
  g.outputs.push_back({"others", {DType::Int64, kIds}});
  save_graph(g, {}, path.string());
}

// The distinct values of an integer tensor.
std::set<int64_t> values_in(const Tensor& t) {
  std::set<int64_t> values;
  for (int64_t i = 0; i < t.numel(); ++i)
    values.insert(t.dtype() == DType::Int32 ? t.data<int32_t>()[i] : t.data<int64_t>()[i]);
  return values;
}

TEST(GeneratedInputs, IndicesStayInsideTheTableTheyIndex) {
  const fs::path dir = scratch_path("dprun_generated_inputs");
  fs::remove_all(dir);
  fs::create_directories(dir);
  write_embedding_model(dir / "model.onnx");
  const std::string run = (dir / "model.onnx").string() + " --batch 4 --symbol seq=16 ";
  auto r = run_dprun(run + "--devices cpu:0,cpu:1 --output-dir " + (dir / "out").string());
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(values_in(read_npy((dir / "out" / "types.npy").string())), (std::set<int64_t>{0, 1}));
  EXPECT_EQ(values_in(read_npy((dir / "out" / "positions.npy").string())),
            (std::set<int64_t>{0, 1, 2}));
  // An input that indexes nothing keeps the range it always had, [0, 10).
  const std::set<int64_t> others = values_in(read_npy((dir / "out" / "others.npy").string()));
  EXPECT_EQ(*others.begin(), 0);
  EXPECT_EQ(*others.rbegin(), 9);
  r = run_dprun("bench " + run + "--devices cpu:0 --iters 2");
  EXPECT_EQ(r.status, 0) << r.output;
  fs::remove_all(dir);
}

// ids + 5 -> Gather(table of 8 rows): generated ids up to 9 index past the table, which no
// graph walk can foresee.
void write_shifted_index_model(const fs::path& path) {
  Graph g;
  g.name = "shifted";
  g.opset_imports[""] = 13;
  g.inputs.push_back({"ids", {DType::Int64, kIds}});
  g.initializers["table"] = random_floats({8, 2}, 3);
  g.initializers["five"] = Tensor::scalar<int64_t>(5);
  Node gather = make_node("Gather", {"table", "shifted"}, {"emb"});
  gather.name = "g";
  g.nodes = {make_node("Add", {"ids", "five"}, {"shifted"}), gather};
  g.outputs.push_back({"emb", {DType::Float32, SymbolicShape{kIds[0], kIds[1], Dim::known(2)}}});
  save_graph(g, {}, path.string());
}

TEST(GeneratedInputs, AFailureOnGeneratedInputsSaysSoAndSuggestsInput) {
  const fs::path model = scratch_path("dprun_shifted.onnx");
  write_shifted_index_model(model);
  const std::string note = " (on generated input ids: give real data with --input NAME=FILE.npy)\n";
  for (const std::string command : {"", "bench "}) {
    auto r = run_dprun(command + model.string() + " --devices cpu:0 --batch 2 --symbol seq=8");
    EXPECT_EQ(r.status, 1) << r.output;
    EXPECT_EQ(r.output.rfind("dprun: error: ", 0), 0u) << r.output;
    EXPECT_NE(r.output.find("[Gather] node 'g'"), std::string::npos) << r.output;
    ASSERT_GT(r.output.size(), note.size()) << r.output;
    EXPECT_EQ(r.output.substr(r.output.size() - note.size()), note) << command << r.output;
  }
}

}  // namespace
}  // namespace dprun::testing
