// Mixed-precision training (TrainingGraphSpec::precision = bfloat16 or float16): the forward and
// backward passes compute in 16 bits, the parameters, their gradients, the loss,
// BatchNormalization and its running statistics stay float32.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "accelerator_test_util.h"
#include "engine/half.h"
#include "engine/parallel/device_list.h"
#include "engine/training/trainer.h"
#include "graph_test_util.h"
#include "half_test_util.h"
#include "op_test_util.h"

namespace dprun {
namespace {

using testing::make_node;
using testing::random_floats;
using testing::rounded_16bit;

/// testing::small_mlp_graph with its intermediate values typed, so the 16-bit conversion knows
/// them.
std::shared_ptr<Graph> mlp_graph() {
  auto g = testing::small_mlp_graph(false);
  for (const char* v : {"h0", "h1", "h2"})
    g->value_types[v] = {DType::Float32, SymbolicShape{Dim::named("N"), Dim::known(8)}};
  g->value_types["h3"] = {DType::Float32, SymbolicShape{Dim::named("N"), Dim::known(3)}};
  return g;
}

TrainingGraphSpec mse_in(DType precision) {
  TrainingGraphSpec spec;
  spec.loss.kind = LossKind::Mse;
  spec.precision = precision;
  return spec;
}

TEST(MixedPrecision, TheTrainingGraphComputesIn16BitsFromFloat32Parameters) {
  for (DType precision : {DType::BFloat16, DType::Float16}) {
    SCOPED_TRACE(dtype_name(precision));
    const TrainingGraph training = build_training_graph(*mlp_graph(), mse_in(precision));
    const Graph& g = *training.graph;
    EXPECT_EQ(training.parameters, (std::vector<std::string>{"W1", "W2", "b1", "b2"}));
    for (const std::string& p : training.parameters) {
      EXPECT_EQ(g.initializers.at(p).dtype(), DType::Float32) << p;
      EXPECT_EQ(g.type_of(gradient_output_name(p))->dtype, DType::Float32) << p;
    }
    EXPECT_EQ(g.type_of(training.loss)->dtype, DType::Float32);
    EXPECT_EQ(training.loss_dtype, DType::Float32);
    // Every MatMul, forward and backward, reads and writes 16 bits.
    int matmuls = 0;
    for (const Node& node : g.nodes) {
      if (node.op_type != "MatMul") continue;
      ++matmuls;
      for (const std::string& v : {node.inputs[0], node.inputs[1], node.outputs[0]})
        EXPECT_EQ(g.type_of(v)->dtype, precision) << node.name << " " << v;
    }
    EXPECT_EQ(matmuls, 2 + 3);  // two forward; dW1, dW2 and the gradient of h2
  }
}

/// The gradients and losses of `steps` SGD steps of the MLP in `precision` on `devices`.
struct TrainingRun {
  std::vector<double> losses;
  std::vector<Tensor> first_gradients;
  Tensor w;
};
TrainingRun train(DType precision, const char* devices, int steps) {
  TrainerOptions options;
  options.training = mse_in(precision);
  options.parallel.device_ids = parse_device_list(devices);
  auto model = std::make_shared<Model>(mlp_graph(), options.parallel.device_ids[0]);
  // float16: a scale at which no gradient of this MLP overflows, so every step is taken.
  options.loss_scaling.init_scale = 1024;
  Trainer trainer(model, options);
  Sgd sgd(trainer.parameters(), {.lr = 0.05, .momentum = 0.9});
  const Tensor x = random_floats({12, 4}, 10), t = random_floats({12, 3}, 11);
  TrainingRun run;
  for (int s = 0; s < steps; ++s) {
    if (s == 0) {
      trainer.forward_backward({x}, t);
      for (const Tensor& g : trainer.gradients()) run.first_gradients.push_back(g.clone());
      if (GradScaler* scaler = trainer.grad_scaler()) {  // they are of the scaled loss
        EXPECT_TRUE(scaler->unscale(run.first_gradients));
        scaler->update();
      }
    }
    run.losses.push_back(trainer.step({x}, t, sgd));
  }
  run.w = model->parameter("W1").to(Device::cpu());
  EXPECT_EQ(run.w.dtype(), DType::Float32);
  if (const GradScaler* scaler = trainer.grad_scaler()) {
    EXPECT_EQ(scaler->skipped_steps(), 0);
  }
  return run;
}

// bfloat16 keeps 8 significant bits, float16 11: each gradient is within a few of its steps of
// the float32 one, relative to the largest gradient of its parameter, and differs from it
// somewhere (the passes did run in 16 bits). The losses follow the float32 run's.
TEST(MixedPrecision, TracksFloat32TrainingWithin16BitRounding) {
  for (DType precision : {DType::BFloat16, DType::Float16})
    for (const char* devices : {"cpu:0", "cpu:0,cpu:1", "sim:0"}) {
      SCOPED_TRACE(std::string(dtype_name(precision)) + " on " + devices);
      const double tolerance = precision == DType::BFloat16 ? 0.05 : 0.01;
      const TrainingRun wide = train(DType::Float32, devices, 6);
      const TrainingRun narrow = train(precision, devices, 6);
      ASSERT_EQ(narrow.first_gradients.size(), wide.first_gradients.size());
      bool any_difference = false;
      for (size_t p = 0; p < wide.first_gradients.size(); ++p) {
        const Tensor want = wide.first_gradients[p].to(Device::cpu());
        const Tensor got = narrow.first_gradients[p].to(Device::cpu());
        ASSERT_EQ(got.dtype(), DType::Float32);
        double scale = 0;
        for (int64_t i = 0; i < want.numel(); ++i)
          scale = std::max(scale, std::fabs(want.item_as_double(i)));
        for (int64_t i = 0; i < want.numel(); ++i) {
          EXPECT_NEAR(got.item_as_double(i), want.item_as_double(i), tolerance * scale)
              << "parameter " << p << " element " << i;
          any_difference = any_difference || got.item_as_double(i) != want.item_as_double(i);
        }
      }
      EXPECT_TRUE(any_difference) << "the 16-bit gradients are the float32 ones";
      for (size_t s = 0; s < wide.losses.size(); ++s)
        EXPECT_NEAR(narrow.losses[s], wide.losses[s], 0.6 * tolerance * wide.losses[s])
            << "step " << s;
      EXPECT_LT(narrow.losses.back(), 0.8 * narrow.losses.front());
    }
}

TEST(MixedPrecision, SameSeedSameDevicesSameBits) {
  const TrainingRun a = train(DType::BFloat16, "cpu:0,cpu:1", 3);
  const TrainingRun b = train(DType::BFloat16, "cpu:0,cpu:1", 3);
  EXPECT_EQ(a.losses, b.losses);
  for (int64_t i = 0; i < a.w.numel(); ++i)
    ASSERT_EQ(a.w.data<float>()[i], b.w.data<float>()[i]) << i;
}

// x [N, 2, 3] -> Relu -> BatchNormalization (training mode, momentum 0.8) -> y. The Relu runs in
// bfloat16; BatchNormalization stays float32: it reads the Relu's bfloat16 result widened, and
// keeps float32 running statistics, which are PyTorch's update over those values, exactly.
TEST(MixedPrecision, BatchNormalizationAndItsStatisticsStayFloat32) {
  auto g = std::make_shared<Graph>();
  g->name = "bn";
  g->opset_imports[""] = 15;
  g->inputs.push_back(
      {"x", {DType::Float32, SymbolicShape{Dim::named("N"), Dim::known(2), Dim::known(3)}}});
  g->initializers["scale"] = Tensor::from_vector<float>({2}, {1.5f, 0.5f});
  g->initializers["bias"] = Tensor::from_vector<float>({2}, {0.1f, -0.2f});
  g->initializers["mean"] = Tensor::from_vector<float>({2}, {0.3f, -0.1f});
  g->initializers["var"] = Tensor::from_vector<float>({2}, {1.2f, 0.7f});
  g->nodes.push_back(make_node("Relu", {"x"}, {"r"}));
  g->value_types["r"] = g->inputs[0].type;
  Node bn = make_node("BatchNormalization", {"r", "scale", "bias", "mean", "var"},
                      {"y", "mean_out", "var_out"});
  bn.attributes["training_mode"] = Attribute::of_int(1);
  bn.attributes["momentum"] = Attribute::of_float(0.8f);
  g->nodes.push_back(bn);
  g->outputs.push_back({"y", {DType::Float32, std::nullopt}});
  g->state_updates = {{"mean_out", "mean"}, {"var_out", "var"}};

  const TrainingGraph training = build_training_graph(*g, mse_in(DType::BFloat16));
  for (const Node& node : training.graph->nodes)
    if (node.op_type == "BatchNormalization") {
      EXPECT_EQ(node.inputs[1], "scale");
      EXPECT_EQ(training.graph->type_of(node.inputs[0])->dtype, DType::Float32);
    }

  auto model = std::make_shared<Model>(g, Device::cpu(0));
  TrainerOptions options;
  options.training = mse_in(DType::BFloat16);
  Trainer trainer(model, options);
  const Tensor x = random_floats({5, 2, 3}, 41), t = random_floats({5, 2, 3}, 42);
  trainer.forward_backward({x}, t);
  const double n = 15;
  for (int64_t c = 0; c < 2; ++c) {
    double sum = 0, sq = 0;
    auto rounded = [&](int64_t i, int64_t j) {
      return rounded_16bit(std::max(x.data<float>()[(i * 2 + c) * 3 + j], 0.f), DType::BFloat16);
    };
    for (int64_t i = 0; i < 5; ++i)
      for (int64_t j = 0; j < 3; ++j) sum += rounded(i, j);
    const double mean = sum / n;
    for (int64_t i = 0; i < 5; ++i)
      for (int64_t j = 0; j < 3; ++j) sq += (rounded(i, j) - mean) * (rounded(i, j) - mean);
    const double mean0 = c == 0 ? 0.3 : -0.1, var0 = c == 0 ? 1.2 : 0.7;
    ASSERT_EQ(model->parameter("mean").dtype(), DType::Float32);
    EXPECT_NEAR(model->parameter("mean").data<float>()[c], 0.8 * mean0 + 0.2 * mean, 1e-6);
    EXPECT_NEAR(model->parameter("var").data<float>()[c], 0.8 * var0 + 0.2 * sq / (n - 1), 1e-6);
  }
}

}  // namespace
}  // namespace dprun
