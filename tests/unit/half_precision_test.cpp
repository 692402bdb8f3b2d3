// Conversion of float32 models to float16 and bfloat16 (engine/rewrites/half_precision.h): what
// is converted and what stays float32, and the bundled models in 16 bits against PyTorch's
// float32 outputs within the error 16 bits give.
#include "engine/rewrites/half_precision.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "accelerator_test_util.h"
#include "bundled_model_util.h"
#include "engine/parallel/data_parallel.h"
#include "graph_test_util.h"
#include "half_test_util.h"
#include "loader/npy.h"
#include "loader/onnx_loader.h"

namespace dprun {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> op_types(const Graph& g) {
  std::vector<std::string> ops;
  for (const Node& n : g.nodes) ops.push_back(n.op_type);
  return ops;
}

const Node& node_writing(const Graph& g, const std::string& value) {
  for (const Node& n : g.nodes)
    for (const auto& o : n.outputs)
      if (o == value) return n;
  throw Error("no node writes " + value);
}

/// x [1, 2, 2, 2] float32 -> Mul by a Constant (value_float 3) -> Resize by constant scales
/// [1, 1, 2, 2] -> Cast to float32 of an int64 shape added -> y.
std::shared_ptr<Graph> resize_graph() {
  auto g = std::make_shared<Graph>();
  g->opset_imports[""] = 17;
  g->inputs = {{"x", testing::float32_type({1, 2, 2, 2})}};
  g->initializers["scales"] = Tensor::from_vector<float>({4}, {1, 1, 2, 2});
  Node three = testing::make_node("Constant", {}, {"three"});
  three.attributes["value_float"] = Attribute::of_float(3.f);
  g->nodes.push_back(three);
  g->nodes.push_back(testing::make_node("Mul", {"x", "three"}, {"x3"}));
  g->nodes.push_back(testing::make_node("Resize", {"x3", "", "scales"}, {"big"}));
  g->nodes.push_back(testing::make_node("Shape", {"big"}, {"shape"}));
  Node cast = testing::make_node("Cast", {"shape"}, {"shape_f"});
  cast.attributes["to"] = Attribute::of_int(static_cast<int64_t>(DType::Float32));
  g->nodes.push_back(cast);
  g->nodes.push_back(testing::make_node("ReduceSum", {"shape_f"}, {"dims_sum"}));
  g->nodes.push_back(testing::make_node("Add", {"big", "dims_sum"}, {"y"}));
  g->value_types["three"] = {DType::Float32, SymbolicShape{}};
  g->value_types["x3"] = testing::float32_type({1, 2, 2, 2});
  g->value_types["big"] = testing::float32_type({1, 2, 4, 4});
  g->value_types["shape_f"] = testing::float32_type({4});
  g->value_types["dims_sum"] = testing::float32_type({1});
  g->outputs = {{"y", testing::float32_type({1, 2, 4, 4})}};
  return g;
}

TEST(HalfPrecision, ConvertsValuesAndKeepsFloat32InputsOutputsAndScales) {
  std::shared_ptr<Graph> h = to_half_precision(*resize_graph(), {.dtype = DType::Float16});
  // The input is cast in, Resize runs between Casts, the output is cast out.
  EXPECT_EQ(op_types(*h),
            (std::vector<std::string>{"Cast", "Constant", "Mul", "Cast", "Resize", "Cast", "Shape",
                                      "Cast", "ReduceSum", "Add", "Cast"}));
  EXPECT_EQ(h->inputs[0].type.dtype, DType::Float32);
  EXPECT_EQ(h->outputs[0].type.dtype, DType::Float32);
  EXPECT_EQ(h->type_of("x/float16")->dtype, DType::Float16);
  EXPECT_EQ(h->type_of("y/float16")->dtype, DType::Float16);
  // Resize's scales are float by its schema: read only by Resize, they stay float32.
  EXPECT_EQ(h->initializers.at("scales").dtype(), DType::Float32);
  EXPECT_EQ(h->type_of("big")->dtype, DType::Float16);
  EXPECT_EQ(h->type_of("x3")->dtype, DType::Float16);
  // value_float becomes a 16-bit value tensor; the graph's Cast to float32 now casts to 16 bits.
  const Node& three = node_writing(*h, "three");
  EXPECT_FALSE(three.has_attr("value_float"));
  EXPECT_EQ(three.attr_tensor("value").dtype(), DType::Float16);
  EXPECT_EQ(three.attr_tensor("value").item_as_double(0), 3.0);
  EXPECT_EQ(node_writing(*h, "shape_f").attr_int("to"), static_cast<int64_t>(DType::Float16));
  EXPECT_EQ(node_writing(*h, "y").attr_int("to"), static_cast<int64_t>(DType::Float32));
  EXPECT_EQ(node_writing(*h, "y").inputs[0], "y/float16");
}

// A converted graph converted again gets new names for its new Casts (the plain ones are
// taken) and computes the same values.
TEST(HalfPrecision, ConvertingAConvertedGraphAgainComputesTheSame) {
  auto g = resize_graph();
  std::shared_ptr<Graph> once = to_half_precision(*g, {.dtype = DType::BFloat16});
  std::shared_ptr<Graph> twice = to_half_precision(*once, {.dtype = DType::BFloat16});
  EXPECT_EQ(node_writing(*twice, "y").inputs[0], "y/bfloat16_1");
  Tensor x = Tensor::from_vector<float>({1, 2, 2, 2}, {0.5f, -1, 2, 0.25f, 1, 1.5f, -2, 3});
  const Tensor want = Model(once, Device::cpu()).run(std::vector<Tensor>{x})[0];
  const Tensor got = Model(twice, Device::cpu()).run(std::vector<Tensor>{x})[0];
  ASSERT_EQ(got.shape(), want.shape());
  for (int64_t i = 0; i < want.numel(); ++i)
    EXPECT_EQ(got.item_as_double(i), want.item_as_double(i)) << "element " << i;
}

// keep_parameters (mixed-precision training): initializers stay float32, each cast once for
// its 16-bit readers; an initializer only a float32 op reads (Resize's scales) is read as it is.
TEST(HalfPrecision, KeptParametersAreCastOnceForTheir16BitReaders) {
  auto g = resize_graph();
  g->initializers["w"] = Tensor::from_vector<float>({1, 2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
  for (Node& node : g->nodes)
    if (node.op_type == "Mul") node.inputs[1] = "w";
  std::shared_ptr<Graph> h =
      to_half_precision(*g, {.dtype = DType::BFloat16, .keep_parameters = true});
  EXPECT_EQ(h->initializers.at("w").dtype(), DType::Float32);
  EXPECT_EQ(h->initializers.at("scales").dtype(), DType::Float32);
  const Node& cast = node_writing(*h, "w/bfloat16");
  EXPECT_EQ(cast.op_type, "Cast");
  EXPECT_EQ(cast.inputs[0], "w");
  EXPECT_EQ(h->type_of("w/bfloat16")->dtype, DType::BFloat16);
  int readers_of_w = 0;
  for (const Node& node : h->nodes) {
    if (node.op_type == "Resize") {
      EXPECT_EQ(node.inputs[2], "scales");
    }
    if (node.op_type == "Mul") {
      EXPECT_EQ(node.inputs[1], "w/bfloat16");
    }
    for (const std::string& in : node.inputs) readers_of_w += in == "w" ? 1 : 0;
  }
  EXPECT_EQ(readers_of_w, 1) << "only the Cast reads the float32 w";
}

TEST(HalfPrecision, RunsWhatTheFloat32GraphComputes) {
  auto g = resize_graph();
  Tensor x = Tensor::from_vector<float>({1, 2, 2, 2}, {0.5f, -1, 2, 0.25f, 1, 1.5f, -2, 3});
  Model f32(g, Device::cpu());
  Model f16(g, Device::cpu(), {.precision = DType::Float16});
  EXPECT_EQ(f16.graph().type_of("x3")->dtype, DType::Float16);
  Tensor want = f32.run(std::vector<Tensor>{x})[0];
  Tensor got = f16.run(std::vector<Tensor>{x})[0];
  ASSERT_EQ(got.dtype(), DType::Float32);
  ASSERT_EQ(got.shape(), want.shape());
  // Every value is a multiple of 1/4 below 2048 + 16: exact in float16.
  for (int64_t i = 0; i < want.numel(); ++i)
    EXPECT_EQ(got.item_as_double(i), want.item_as_double(i)) << "element " << i;
}

TEST(HalfPrecision, WithoutKeptIoTypesInputsAndOutputsAre16Bit) {
  std::shared_ptr<Graph> h =
      to_half_precision(*resize_graph(), {.dtype = DType::BFloat16, .keep_io_types = false});
  EXPECT_EQ(h->inputs[0].type.dtype, DType::BFloat16);
  EXPECT_EQ(h->outputs[0].type.dtype, DType::BFloat16);
  EXPECT_EQ(h->nodes.front().op_type, "Constant");
  EXPECT_EQ(h->nodes.back().op_type, "Add");
}

TEST(HalfPrecision, AnInputPassedThroughStaysAsItIs) {
  auto g = resize_graph();
  g->outputs.push_back({"x", testing::float32_type({1, 2, 2, 2})});
  std::shared_ptr<Graph> h = to_half_precision(*g, {.dtype = DType::Float16});
  EXPECT_EQ(h->outputs.back().name, "x");
  EXPECT_EQ(h->outputs.back().type.dtype, DType::Float32);
  for (const Node& n : h->nodes)
    for (const auto& out : n.outputs) EXPECT_NE(out, "x") << "a node writes the input";
  Tensor x = Tensor::from_vector<float>({1, 2, 2, 2}, {0.1f, 2, 3, 4, 5, 6, 7, 8});
  std::vector<Tensor> got =
      Model(g, Device::cpu(), {.precision = DType::Float16}).run(std::vector<Tensor>{x});
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[1].data<float>()[0], 0.1f);  // not rounded through 16 bits
}

TEST(HalfPrecision, RefusesOtherTargetsAndSubgraphs) {
  try {
    to_half_precision(*resize_graph(), {.dtype = DType::Float64});
    FAIL() << "converted to float64";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "16-bit conversion: float64 is not float16 or bfloat16");
  }
  auto g = resize_graph();
  Node branch = testing::make_node("If", {"x"}, {"z"});
  branch.name = "choose";
  branch.attributes["then_branch"] = testing::graph_attr(std::make_shared<Graph>());
  g->nodes.push_back(branch);
  try {
    to_half_precision(*g, {});
    FAIL() << "converted a graph with an If";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "[If] node 'choose': 16-bit conversion does not cover nodes holding subgraphs");
  }
}

TEST(HalfPrecision, Float32OpsListIsOfKnownOps) {
  for (const std::string& op : float32_ops())
    EXPECT_TRUE(KernelRegistry::instance().knows_op("", op)) << op;
}

TEST(HalfPrecision, DataParallelScattersAndGathers16BitTensors) {
  // The transformer with 16-bit inputs and outputs, 5 rows over three devices against one.
  auto graph = to_half_precision(*load_graph(testing::bundled_model_path("transformer")),
                                 {.dtype = DType::Float16, .keep_io_types = false});
  EXPECT_EQ(graph->inputs[1].type.dtype, DType::Float16);  // the attention mask
  auto model = std::make_shared<Model>(graph, Device::cpu());
  const std::vector<Tensor> inputs = testing::deterministic_inputs(*model, 5);
  const std::vector<Tensor> want = model->run(inputs);
  DataParallel dp(model, {.device_ids = {Device::cpu(0), Device::cpu(1), Device::sim(0)}});
  const std::vector<Tensor> got = dp.forward(inputs);
  ASSERT_EQ(got.size(), want.size());
  for (size_t o = 0; o < want.size(); ++o) {
    const Tensor host = got[o].to(Device::cpu());
    ASSERT_EQ(host.dtype(), DType::Float16);
    ASSERT_EQ(host.shape(), want[o].shape());
    // A row's arithmetic depends neither on the split nor, here, on the device: the simulated
    // GPU's replica is compiled as its backend compiles the model, fusing each 16-bit MatMul with
    // its bias as the CPU does, and it runs the CPU's kernels.
    for (int64_t i = 0; i < want[o].numel(); ++i)
      ASSERT_EQ(host.item_as_double(i), want[o].item_as_double(i))
          << "output " << o << " element " << i;
  }
}

/// The largest |got - want| over the largest |want|: the error relative to the output's scale.
double scaled_error(const Tensor& got, const Tensor& want) {
  double scale = 0, worst = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    scale = std::max(scale, std::fabs(want.item_as_double(i)));
    worst = std::max(worst, std::fabs(got.item_as_double(i) - want.item_as_double(i)));
  }
  return worst / scale;
}

/// Each bundled model converted to 16 bits, on a device, against PyTorch's float32 outputs
/// shipped beside it (models/NAME.output.OUT.npy).
class BundledModelsIn16Bits : public ::testing::TestWithParam<std::tuple<DType, DeviceType>> {};

TEST_P(BundledModelsIn16Bits, MatchPyTorchWithinTheirRounding) {
  const auto [dtype, device_type] = GetParam();
  const std::string why = testing::accelerator_unusable_reason(device_type);
  if (!why.empty())
    GTEST_SKIP() << "needs a " << device_type_name(device_type) << " device: " << why;
  // Bounds: a float16 value carries 11 significant bits (relative rounding 4.9e-4), bfloat16 8
  // (3.9e-3); every layer rounds its result again, and the largest errors measured were
  // 1.0e-3 (float16) and 1.4e-2 (bfloat16) of the output's scale.
  const double bound = dtype == DType::Float16 ? 3e-3 : 3e-2;
  for (const auto& [name, path] : testing::bundled_model_paths()) {
    auto graph = load_graph(path);
    Model model(graph, Device{device_type, 0}, {.precision = dtype});
    const fs::path dir = fs::path(path).parent_path();
    std::vector<Tensor> inputs;
    for (const auto& in : graph->required_inputs())
      inputs.push_back(read_npy((dir / (name + ".input." + in->name + ".npy")).string()));
    std::vector<Tensor> got = model.run(inputs);
    ASSERT_EQ(got.size(), graph->outputs.size()) << name;
    for (size_t o = 0; o < got.size(); ++o) {
      const std::string& out = graph->outputs[o].name;
      Tensor want = read_npy((dir / (name + ".output." + out + ".npy")).string());
      Tensor host = got[o].to(Device::cpu());
      ASSERT_EQ(host.dtype(), DType::Float32) << name << " " << out;
      ASSERT_EQ(host.shape(), want.shape()) << name << " " << out;
      const double error = scaled_error(host, want);
      EXPECT_LT(error, bound) << name << " output " << out;
      EXPECT_GT(error, 0) << name << " output " << out << " did not run in 16 bits";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, BundledModelsIn16Bits, testing::half_on_devices(),
                         testing::half_on_device_name);

}  // namespace
}  // namespace dprun
