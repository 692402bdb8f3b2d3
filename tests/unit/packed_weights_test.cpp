// Conv weights reordered once per parameter version (ops/cpu/packed_weights.h), and the
// parameter versions that make it safe: unique per model and per change, passed to kernels,
// and renewed on every write into replica storage.
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

/// A one-Conv model: y = Conv(x, w) with w an initializer.
std::shared_ptr<Graph> conv_graph() {
  auto g = std::make_shared<Graph>();
  g->opset_imports[""] = 17;
  const SymbolicShape x_shape = {Dim::named("batch"), Dim::known(16), Dim::known(6), Dim::known(6)};
  g->inputs.push_back({"x", TensorType{DType::Float32, x_shape}});
  g->outputs.push_back({"y", {}});
  Tensor w = Tensor::empty({8, 16, 3, 3}, DType::Float32);
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> dist(-1, 1);
  for (int64_t i = 0; i < w.numel(); ++i) w.data<float>()[i] = dist(rng);
  g->initializers["w"] = w;
  Node conv = testing::make_node("Conv", {"x", "w"}, {"y"});
  conv.attributes["pads"] = Attribute::of_ints({1, 1, 1, 1});
  g->nodes.push_back(conv);
  return g;
}

Tensor random_input(int64_t batch) {
  Tensor x = Tensor::empty({batch, 16, 6, 6}, DType::Float32);
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> dist(-1, 1);
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = dist(rng);
  return x;
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

TEST(PackedWeightsInModels, EveryWayOfChangingParametersReachesTheConv) {
  for (bool channels_last : {true, false}) {
    SCOPED_TRACE(channels_last ? "channels last" : "NCHW");
    auto graph = conv_graph();
    Model model(graph, Device::cpu(), {.channels_last = channels_last});
    const Tensor original = model.parameter("w").clone();
    const Tensor x = random_input(2);
    const Tensor before = model.run({x})[0];
    EXPECT_EQ(before.item_as_double(0), model.run({x})[0].item_as_double(0));

    const Tensor w = scaled_weights(model);
    model.set_parameter("w", w);
    auto fresh = std::make_shared<Graph>(*graph);
    fresh->initializers["w"] = w;
    const Tensor want = Model(fresh, Device::cpu(), {.channels_last = channels_last}).run({x})[0];
    expect_same(model.run({x})[0], want);

    // Written through the parameter handle: visible once marked.
    model.parameter("w").copy_from(original);
    model.mark_parameters_changed();
    expect_same(model.run({x})[0], before);
  }
}

TEST(PackedWeightsInModels, ReplicasSeeTheBaseParametersAfterEveryChange) {
  auto graph = conv_graph();
  auto model = std::make_shared<Model>(graph, Device::cpu(0));
  DataParallel parallel(model, {.device_ids = {Device::cpu(0), Device::cpu(1)}});
  const Tensor x = random_input(4);
  const Tensor before = parallel.forward({x})[0];
  expect_same(before, model->run({x})[0]);
  model->set_parameter("w", scaled_weights(*model));
  expect_same(parallel.forward({x})[0], model->run({x})[0]);
}

TEST(ParameterVersions, AreUniqueAcrossModelsAndChanges) {
  auto graph = conv_graph();
  Model a(graph, Device::cpu()), b(graph, Device::cpu());
  EXPECT_NE(a.parameters_version(), 0u);
  EXPECT_NE(a.parameters_version(), b.parameters_version());
  const uint64_t first = a.parameters_version();
  a.mark_parameters_changed();
  EXPECT_NE(a.parameters_version(), first);
  EXPECT_NE(a.parameters_version(), b.parameters_version());
}

TEST(ParameterVersions, RefreshingAReplicaGivesItANewVersionButNotTheSharedOne) {
  auto graph = conv_graph();
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
