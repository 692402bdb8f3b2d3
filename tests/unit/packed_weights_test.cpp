// Conv, Gemm and MatMul weights packed once per parameter version (ops/cpu/packed_weights.h),
// and the parameter versions that make it safe: unique per model and per change, passed to
// kernels, and renewed on every write into replica storage.
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <vector>

#include "engine/backend.h"
#include "engine/parallel/data_parallel.h"
#include "engine/parallel/replicate.h"
#include "graph_test_util.h"
#include "op_test_util.h"
#include "ops/cpu/packed_weights.h"

namespace dprun {
namespace {

using dnnl::memory;

/// oneDNN's blocked layout for [8, 16, 3, 3] weights: a reorder is needed to reach it.
const memory::desc kBlocked({8, 16, 3, 3}, memory::data_type::f32, memory::format_tag::OIhw8i8o);

struct PackedWeightsFixture : ::testing::Test {
  Node node = testing::make_node("Conv", {"x", "w"}, {"y"});
  std::unique_ptr<ExecutionContext> execution =
      backend_for(Device::cpu()).create_execution_context(Device::cpu(), {.threads = 1});
  std::vector<Tensor> outputs = std::vector<Tensor>(1);
  KernelContext ctx{node, *execution, {}, outputs};
  Tensor w = Tensor::empty({8, 16, 3, 3}, DType::Float32);
  memory::desc user = onednn::plain_desc(w.shape());

  void SetUp() override {
    for (int64_t i = 0; i < w.numel(); ++i) w.data<float>()[i] = static_cast<float>(i);
  }
  /// The weights' value at logical index [o][i][0][0] in a reordered memory.
  float at(const memory& packed, int64_t o, int64_t i) {
    Tensor back = Tensor::empty(w.shape(), DType::Float32);
    onednn::reorder_into(packed, onednn::wrap(user, back.raw_data()));
    return back.data<float>()[(o * 16 + i) * 9];
  }
};

TEST_F(PackedWeightsFixture, ConstantWeightsAreReorderedOncePerVersion) {
  onednn::PackedWeights packed(/*constant=*/true);
  ctx.set_parameters_version(Model::next_parameters_version());
  memory first = packed.get(ctx, w, user, kBlocked);
  EXPECT_EQ(first.get_data_handle(), packed.get(ctx, w, user, kBlocked).get_data_handle());
  EXPECT_NE(first.get_data_handle(), w.raw_data());
  EXPECT_EQ(at(first, 5, 7), static_cast<float>((5 * 16 + 7) * 9));

  w.data<float>()[(5 * 16 + 7) * 9] = -1.f;  // a change made known by a new version
  ctx.set_parameters_version(Model::next_parameters_version());
  memory second = packed.get(ctx, w, user, kBlocked);
  EXPECT_NE(second.get_data_handle(), first.get_data_handle());
  EXPECT_EQ(at(second, 5, 7), -1.f);
  EXPECT_EQ(at(first, 5, 7), static_cast<float>((5 * 16 + 7) * 9)) << "a held result changed";
}

TEST_F(PackedWeightsFixture, EachStorageKeepsItsOwnEntry) {
  onednn::PackedWeights packed(true);
  ctx.set_parameters_version(Model::next_parameters_version());
  Tensor replica = w.clone();
  replica.data<float>()[0] = 42.f;
  memory a = packed.get(ctx, w, user, kBlocked);
  memory b = packed.get(ctx, replica, user, kBlocked);
  EXPECT_EQ(at(a, 0, 0), 0.f);
  EXPECT_EQ(at(b, 0, 0), 42.f);
  EXPECT_EQ(packed.get(ctx, w, user, kBlocked).get_data_handle(), a.get_data_handle());
  EXPECT_EQ(packed.get(ctx, replica, user, kBlocked).get_data_handle(), b.get_data_handle());
}

TEST_F(PackedWeightsFixture, OtherWeightsAreReorderedEveryCall) {
  ctx.set_parameters_version(Model::next_parameters_version());
  onednn::PackedWeights fed(/*constant=*/false);
  EXPECT_NE(fed.get(ctx, w, user, kBlocked).get_data_handle(),
            fed.get(ctx, w, user, kBlocked).get_data_handle());
  onednn::PackedWeights unknown_version(true);
  ctx.set_parameters_version(0);
  EXPECT_NE(unknown_version.get(ctx, w, user, kBlocked).get_data_handle(),
            unknown_version.get(ctx, w, user, kBlocked).get_data_handle());
}

TEST_F(PackedWeightsFixture, WeightsAlreadyInTheWantedLayoutAreUsedInPlace) {
  onednn::PackedWeights packed(true);
  ctx.set_parameters_version(Model::next_parameters_version());
  EXPECT_EQ(packed.get(ctx, w, user, user).get_data_handle(), w.raw_data());
}

/// The ops whose oneDNN kernels pack a constant weights input once per parameter version.
const std::vector<std::string> kWeightedOps = {"Conv", "Gemm", "MatMul"};

Tensor random_values(Shape shape, unsigned seed) {
  Tensor t = Tensor::empty(std::move(shape), DType::Float32);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1, 1);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = dist(rng);
  return t;
}

/// A one-node model y = op(x, w) with w an initializer: Conv [batch, 16, 6, 6] x [8, 16, 3, 3];
/// Gemm [batch, 16] x [8, 16]^T with a bias; MatMul [batch, 3, 16] x [16, 8].
std::shared_ptr<Graph> weighted_graph(const std::string& op) {
  auto g = std::make_shared<Graph>();
  g->opset_imports[""] = 17;
  SymbolicShape x_shape = {Dim::named("batch"), Dim::known(16)};
  Node node = testing::make_node(op, {"x", "w"}, {"y"});
  if (op == "Conv") {
    x_shape = {Dim::named("batch"), Dim::known(16), Dim::known(6), Dim::known(6)};
    g->initializers["w"] = random_values({8, 16, 3, 3}, 3);
    node.attributes["pads"] = Attribute::of_ints({1, 1, 1, 1});
  } else if (op == "Gemm") {
    g->initializers["w"] = random_values({8, 16}, 3);
    g->initializers["bias"] = random_values({8}, 4);
    node.inputs.push_back("bias");
    node.attributes["transB"] = Attribute::of_int(1);
  } else {
    x_shape = {Dim::named("batch"), Dim::known(3), Dim::known(16)};
    g->initializers["w"] = random_values({16, 8}, 3);
  }
  g->inputs.push_back({"x", TensorType{DType::Float32, x_shape}});
  g->outputs.push_back({"y", {}});
  g->nodes.push_back(node);
  return g;
}

Tensor random_input(const std::string& op, int64_t batch) {
  if (op == "Conv") return random_values({batch, 16, 6, 6}, 5);
  if (op == "Gemm") return random_values({batch, 16}, 5);
  return random_values({batch, 3, 16}, 5);
}

void expect_same(const Tensor& got, const Tensor& want) {
  ASSERT_EQ(shape_to_string(got.shape()), shape_to_string(want.shape()));
  for (int64_t i = 0; i < want.numel(); ++i)
    ASSERT_EQ(got.item_as_double(i), want.item_as_double(i)) << "element " << i;
}

/// Weights scaled by -2, through set_parameter or written in place.
Tensor scaled_weights(const Model& model) {
  Tensor w = model.parameter("w").clone();
  for (int64_t i = 0; i < w.numel(); ++i) w.data<float>()[i] *= -2.f;
  return w;
}

TEST(PackedWeightsInModels, EveryWayOfChangingParametersReachesTheKernel) {
  for (const std::string& op : kWeightedOps)
    for (bool channels_last : {true, false}) {
      SCOPED_TRACE(op + (channels_last ? ", channels last" : ", NCHW"));
      auto graph = weighted_graph(op);
      Model model(graph, Device::cpu(), {.channels_last = channels_last});
      const Tensor original = model.parameter("w").clone();
      const Tensor x = random_input(op, 2);
      const Tensor before = model.run({x})[0];
      expect_same(model.run({x})[0], before);

      const Tensor w = scaled_weights(model);
      model.set_parameter("w", w);
      auto fresh = std::make_shared<Graph>(*graph);
      fresh->initializers["w"] = w;
      const Tensor want = Model(fresh, Device::cpu(), {.channels_last = channels_last}).run({x})[0];
      const Tensor got = model.run({x})[0];
      expect_same(got, want);
      EXPECT_NE(got.item_as_double(0), before.item_as_double(0)) << "the change did not show";

      // Written through the parameter handle: visible once marked.
      model.parameter("w").copy_from(original);
      model.mark_parameters_changed();
      expect_same(model.run({x})[0], before);
    }
}

TEST(PackedWeightsInModels, ReplicasSeeTheBaseParametersAfterEveryChange) {
  for (const std::string& op : kWeightedOps) {
    SCOPED_TRACE(op);
    auto model = std::make_shared<Model>(weighted_graph(op), Device::cpu(0));
    DataParallel parallel(model, {.device_ids = {Device::cpu(0), Device::cpu(1)}});
    const Tensor x = random_input(op, 4);
    const Tensor before = parallel.forward({x})[0];
    expect_same(before, model->run({x})[0]);
    model->set_parameter("w", scaled_weights(*model));
    expect_same(parallel.forward({x})[0], model->run({x})[0]);
  }
}

TEST(ParameterVersions, AreUniqueAcrossModelsAndChanges) {
  auto graph = weighted_graph("Conv");
  Model a(graph, Device::cpu()), b(graph, Device::cpu());
  EXPECT_NE(a.parameters_version(), 0u);
  EXPECT_NE(a.parameters_version(), b.parameters_version());
  const uint64_t first = a.parameters_version();
  a.mark_parameters_changed();
  EXPECT_NE(a.parameters_version(), first);
  EXPECT_NE(a.parameters_version(), b.parameters_version());
}

TEST(ParameterVersions, RefreshingAReplicaGivesItANewVersionButNotTheSharedOne) {
  auto graph = weighted_graph("Conv");
  Model base(graph, Device::cpu(0));
  auto replicas = replicate(base, {Device::cpu(0), Device::cpu(1)});
  const uint64_t shared = replicas[0]->parameters_version();
  const uint64_t copy = replicas[1]->parameters_version();
  refresh_replica(base, *replicas[0]);
  refresh_replica(base, *replicas[1]);
  EXPECT_EQ(replicas[0]->parameters_version(), shared);
  EXPECT_EQ(base.parameters_version(), shared);
  EXPECT_NE(replicas[1]->parameters_version(), copy);
  const uint64_t refreshed = replicas[1]->parameters_version();
  refresh_replicas(base, {replicas[0].get(), replicas[1].get()}, {Device::cpu(0), Device::cpu(1)});
  EXPECT_EQ(base.parameters_version(), shared);
  EXPECT_NE(replicas[1]->parameters_version(), refreshed);
}

}  // namespace
}  // namespace dprun
