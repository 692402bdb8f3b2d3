// Training: optimizers against hand-unrolled torch.optim updates, the training graph's
// parameter selection and errors, and data-parallel steps against one-device steps and the
// analytic gradient of a linear model.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "engine/parallel/comm.h"
#include "engine/parallel/device_list.h"
#include "engine/parallel/scatter.h"
#include "engine/training/trainer.h"
#include "error_test_util.h"
#include "op_test_util.h"

namespace dprun {
namespace {

using testing::make_node;

Tensor floats(Shape shape, std::vector<float> v) {
  return Tensor::from_vector<float>(shape, v);
}

Tensor random_floats(Shape shape, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1, 1);
  std::vector<float> v(static_cast<size_t>(shape_numel(shape)));
  for (auto& x : v) x = dist(rng);
  return floats(shape, v);
}

// ---- optimizers: two steps, unrolled by hand from torch.optim's update rules ----

TEST(Optimizers, SgdMomentumWeightDecay) {
  Tensor p = Tensor::from_vector<double>({2}, {1.0, -2.0});
  Sgd sgd({p}, {.lr = 0.1, .momentum = 0.9, .weight_decay = 0.01});
  Tensor g1 = Tensor::from_vector<double>({2}, {0.5, 0.25});
  Tensor g2 = Tensor::from_vector<double>({2}, {-1.0, 2.0});
  sgd.step({g1});
  // d = g + 0.01 p; buf = d; p -= 0.1 buf
  double d0 = 0.5 + 0.01 * 1.0, d1 = 0.25 + 0.01 * -2.0;
  double p0 = 1.0 - 0.1 * d0, p1 = -2.0 - 0.1 * d1;
  EXPECT_DOUBLE_EQ(p.data<double>()[0], p0);
  EXPECT_DOUBLE_EQ(p.data<double>()[1], p1);
  sgd.step({g2});
  double b0 = 0.9 * d0 + (-1.0 + 0.01 * p0), b1 = 0.9 * d1 + (2.0 + 0.01 * p1);
  EXPECT_DOUBLE_EQ(p.data<double>()[0], p0 - 0.1 * b0);
  EXPECT_DOUBLE_EQ(p.data<double>()[1], p1 - 0.1 * b1);
  EXPECT_EQ(sgd.steps(), 2);
}

TEST(Optimizers, SgdNesterov) {
  Tensor p = Tensor::from_vector<double>({1}, {3.0});
  Sgd sgd({p}, {.lr = 0.5, .momentum = 0.5, .nesterov = true});
  sgd.step({Tensor::from_vector<double>({1}, {2.0})});
  // buf = 2; d = 2 + 0.5 * 2 = 3; p = 3 - 1.5
  EXPECT_DOUBLE_EQ(p.data<double>()[0], 1.5);
  sgd.step({Tensor::from_vector<double>({1}, {-1.0})});
  // buf = 0.5 * 2 - 1 = 0; d = -1 + 0 = -1; p = 1.5 + 0.5
  EXPECT_DOUBLE_EQ(p.data<double>()[0], 2.0);
}

TEST(Optimizers, AdamAndAdamW) {
  for (bool decoupled : {false, true}) {
    SCOPED_TRACE(decoupled ? "AdamW" : "Adam");
    const double lr = 0.1, b1 = 0.9, b2 = 0.99, eps = 1e-8, wd = 0.05;
    Tensor p = Tensor::from_vector<double>({1}, {1.0});
    Adam adam({p}, {.lr = lr,
                    .beta1 = b1,
                    .beta2 = b2,
                    .eps = eps,
                    .weight_decay = wd,
                    .decoupled_weight_decay = decoupled});
    double x = 1.0, m = 0, v = 0;
    for (int t = 1; t <= 3; ++t) {
      double g = 0.3 * t - 0.5;
      adam.step({Tensor::from_vector<double>({1}, {g})});
      if (decoupled)
        x *= 1 - lr * wd;
      else
        g += wd * x;
      m = b1 * m + (1 - b1) * g;
      v = b2 * v + (1 - b2) * g * g;
      double mhat = m / (1 - std::pow(b1, t)), vhat = v / (1 - std::pow(b2, t));
      x -= lr * mhat / (std::sqrt(vhat) + eps);
      EXPECT_NEAR(p.data<double>()[0], x, 1e-12) << "step " << t;
    }
  }
}

TEST(Optimizers, RejectBadSettingsAndGradients) {
  Tensor p = floats({2}, {1, 2});
  EXPECT_THROW(Sgd({p}, {.lr = 0.1, .nesterov = true}), Error);
  EXPECT_THROW(Adam({p}, {.beta1 = 1.0}), Error);
  Sgd sgd({p}, {.lr = 0.1});
  try {
    sgd.step({floats({3}, {1, 2, 3})});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_STREQ(
        e.what(),
        "optimizer: gradient 0 is float32[3] on cpu:0 but its parameter is float32[2] on cpu:0");
  }
  EXPECT_THROW(Sgd({Tensor::from_vector<int64_t>({1}, {1})}, {.lr = 0.1}), Error);
}

// ---- row shares and reduce_add ----

TEST(ScatterRowShare, EachReplicaGetsItsShareOfTheRows) {
  std::vector<Device> devices = parse_device_list("cpu:0,cpu:1,cpu:2");
  Tensor x = random_floats({10, 2}, 1);
  ScatterResult parts = scatter({x, Tensor::scalar<float>(2.0f)}, devices,
                                {.splits = {InputSplit{}, InputSplit::share_of_rows()}});
  ASSERT_EQ(parts.rows, (std::vector<int64_t>{4, 4, 2}));
  EXPECT_FLOAT_EQ(parts.inputs[0][1].item_as_double(), 0.8);
  EXPECT_FLOAT_EQ(parts.inputs[1][1].item_as_double(), 0.8);
  EXPECT_FLOAT_EQ(parts.inputs[2][1].item_as_double(), 0.4);
  EXPECT_THROW(scatter({x, floats({1}, {1})}, devices,
                       {.splits = {InputSplit{}, InputSplit::share_of_rows()}}),
               Error);
}

TEST(ScatterRowShare, ACountedShareIsOfTheElementsThatAreNotIgnored) {
  std::vector<Device> devices = parse_device_list("cpu:0,cpu:1,cpu:2");
  const std::vector<std::string> names = {"x", "target", "weight"};
  const std::vector<InputSplit> splits = {InputSplit{}, InputSplit{},
                                          InputSplit::share_of_counted("target", -100)};
  Tensor x = random_floats({10, 2}, 1);
  auto weights_for = [&](std::vector<int64_t> target) {
    ScatterResult parts =
        scatter({x, Tensor::from_vector<int64_t>({10}, target), Tensor::scalar<float>(2.0f)},
                devices, {.splits = splits, .names = names});
    EXPECT_EQ(parts.rows, (std::vector<int64_t>{4, 4, 2}));
    std::vector<double> w;
    for (const auto& chunk : parts.inputs) w.push_back(chunk[2].item_as_double());
    return w;
  };
  // Chunks of 4, 4 and 2 rows counting 3, 1 and 0 targets: weights 2 * 3/4, 2 * 1/4 and 0.
  EXPECT_EQ(weights_for({0, -100, 1, 2, -100, -100, -100, 3, -100, -100}),
            (std::vector<double>{1.5, 0.5, 0.0}));
  EXPECT_EQ(weights_for(std::vector<int64_t>(10, -100)), (std::vector<double>{0, 0, 0}));

  auto error_with = [&](InputSplit rule, Tensor target) {
    return testing::error_of([&] {
      scatter({x, target, Tensor::scalar<float>(2.0f)}, devices,
              {.splits = {InputSplit{}, InputSplit{}, rule}, .names = names});
    });
  };
  const Tensor labels = Tensor::from_vector<int64_t>({10}, std::vector<int64_t>(10, 1));
  EXPECT_EQ(error_with(InputSplit::share_of_counted("labels", -100), labels),
            "scatter: the counted input 'labels' is not an input");
  EXPECT_EQ(error_with(InputSplit::share_of_counted("x", -100), labels),
            "scatter: the counted input 'x' must be an int64 input split across the replicas, not "
            "float32[10, 2] on cpu:0");
}

TEST(ReduceAdd, SumsInListOrder) {
  std::vector<Device> devices = parse_device_list("cpu:0,cpu:1");
  Tensor a = floats({3}, {1e8f, 1, 2}).to(devices[0]);
  Tensor b = floats({3}, {-1e8f, 3, 4}).to(devices[1]);
  Tensor c = floats({3}, {1, 5, 6});
  Tensor s = reduce_add({a, b, c}, devices[0]);
  EXPECT_EQ(s.device(), devices[0]);
  // (1e8 + -1e8) + 1 = 1 in list order (a different order would lose the 1).
  EXPECT_EQ(s.data<float>()[0], 1.0f);
  EXPECT_EQ(s.data<float>()[1], 9.0f);
  EXPECT_EQ(s.data<float>()[2], 12.0f);
  EXPECT_THROW(reduce_add({a, floats({2}, {1, 2})}, devices[0]), Error);
}

// ---- a linear model: y = x W + b ----

std::shared_ptr<Graph> linear_graph(int64_t in, int64_t out) {
  auto g = std::make_shared<Graph>();
  g->name = "linear";
  g->opset_imports[""] = 17;
  g->inputs.push_back({"x", {DType::Float32, SymbolicShape{Dim::named("N"), Dim::known(in)}}});
  g->initializers["W"] = random_floats({in, out}, 11);
  g->initializers["b"] = random_floats({out}, 12);
  g->nodes.push_back(make_node("MatMul", {"x", "W"}, {"xw"}));
  g->nodes.back().name = "matmul";
  g->nodes.push_back(make_node("Add", {"xw", "b"}, {"y"}));
  g->nodes.back().name = "add";
  g->value_types["xw"] = {DType::Float32, SymbolicShape{Dim::named("N"), Dim::known(out)}};
  g->outputs.push_back({"y", {DType::Float32, SymbolicShape{Dim::named("N"), Dim::known(out)}}});
  return g;
}

TEST(TrainingGraph, SelectsTrainableParametersAndNamesOutputs) {
  auto g = linear_graph(3, 2);
  g->initializers["unused"] = floats({1}, {0});
  g->initializers["steps"] = Tensor::from_vector<int64_t>({1}, {4});
  TrainingGraphSpec spec;
  spec.loss.kind = LossKind::Mse;
  TrainingGraph t = build_training_graph(*g, spec);
  EXPECT_EQ(t.parameters, (std::vector<std::string>{"W", "b"}));
  EXPECT_EQ(t.target, "target");
  std::vector<std::string> outputs;
  for (const auto& o : t.graph->outputs) outputs.push_back(o.name);
  EXPECT_EQ(outputs, (std::vector<std::string>{"loss", "W_grad", "b_grad"}));
  std::vector<std::string> inputs;
  for (const auto& i : t.graph->inputs) inputs.push_back(i.name);
  EXPECT_EQ(inputs, (std::vector<std::string>{"x", "target", "loss_weight"}));

  spec.freeze = {"b"};
  EXPECT_EQ(build_training_graph(*g, spec).parameters, (std::vector<std::string>{"W"}));
  spec.freeze = {"nope"};
  try {
    build_training_graph(*g, spec);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "--freeze names 'nope', which is not an initializer of the model");
  }
  spec.freeze = {"W", "b"};
  EXPECT_THROW(build_training_graph(*g, spec), Error);
}

TEST(TrainingGraph, ReportsEveryNodeWithoutAGradientRule) {
  auto g = linear_graph(3, 2);
  g->nodes.push_back(make_node("Hardmax", {"y"}, {"s"}));
  g->nodes.back().name = "hardmax";
  g->nodes.push_back(make_node("Shrink", {"s"}, {"c"}));
  g->nodes.back().name = "shrink";
  g->outputs = {{"c", {}}};
  TrainingGraphSpec spec;
  spec.loss.kind = LossKind::None;
  try {
    build_training_graph(*g, spec);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "cannot train: 2 nodes have no gradient rule: [Hardmax] node 'hardmax', [Shrink] "
                 "node 'shrink'");
  }
}

// The analytic gradient of mean((xW + b - t)^2) over every element.
void expect_linear_mse_gradients(const Tensor& x, const Tensor& t, const Tensor& w, const Tensor& b,
                                 const std::vector<Tensor>& grads, double loss) {
  int64_t n = x.dim(0), in = x.dim(1), out = w.dim(1);
  std::vector<double> r(static_cast<size_t>(n * out));
  double sum = 0;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t o = 0; o < out; ++o) {
      double y = b.data<float>()[o];
      for (int64_t k = 0; k < in; ++k)
        y += x.data<float>()[i * in + k] * w.data<float>()[k * out + o];
      double d = y - t.data<float>()[i * out + o];
      r[static_cast<size_t>(i * out + o)] = d;
      sum += d * d;
    }
  double scale = 2.0 / static_cast<double>(n * out);
  EXPECT_NEAR(loss, sum / static_cast<double>(n * out), 1e-5);
  for (int64_t k = 0; k < in; ++k)
    for (int64_t o = 0; o < out; ++o) {
      double g = 0;
      for (int64_t i = 0; i < n; ++i)
        g += x.data<float>()[i * in + k] * r[static_cast<size_t>(i * out + o)];
      EXPECT_NEAR(grads[0].data<float>()[k * out + o], scale * g, 1e-5) << "dW " << k << "," << o;
    }
  for (int64_t o = 0; o < out; ++o) {
    double g = 0;
    for (int64_t i = 0; i < n; ++i) g += r[static_cast<size_t>(i * out + o)];
    EXPECT_NEAR(grads[1].data<float>()[o], scale * g, 1e-5) << "db " << o;
  }
}

TEST(Trainer, GradientsOfTheWholeBatchHoweverItIsSplit) {
  Tensor x = random_floats({10, 3}, 21), t = random_floats({10, 2}, 22);
  for (const char* devices : {"", "cpu:0", "cpu:0,cpu:1,cpu:2", "cpu:0,cpu:1,cpu:2,cpu:3"}) {
    SCOPED_TRACE(devices);
    auto model = std::make_shared<Model>(linear_graph(3, 2), Device::cpu(0));
    TrainerOptions options;
    options.training.loss.kind = LossKind::Mse;
    if (*devices) options.parallel.device_ids = parse_device_list(devices);
    Trainer trainer(model, options);
    double loss = trainer.forward_backward({x}, t);
    ASSERT_EQ(trainer.gradients().size(), 2u);
    expect_linear_mse_gradients(x, t, model->parameter("W"), model->parameter("b"),
                                trainer.gradients(), loss);
    EXPECT_EQ(trainer.gradients()[0].device(), Device::cpu(0));
  }
}

// PyTorch's DataParallel averages the loss over the gathered outputs' targets that are not
// ignored: replicas holding more of them weigh more, and one holding none adds nothing.
TEST(Trainer, IgnoredTargetsWeighTheReplicasByTheTargetsTheyCount) {
  Tensor x = random_floats({10, 3}, 31);
  // Chunks of 4, 4 and 2 rows (3 devices) count 3, 1 and 0 targets; of 3, 3, 3 and 1 rows
  // (4 devices) 2, 1, 1 and 0.
  Tensor t = Tensor::from_vector<int64_t>({10}, {0, -100, 1, 2, -100, -100, -100, 3, -100, -100});
  Tensor all_ignored = Tensor::from_vector<int64_t>({10}, std::vector<int64_t>(10, -100));
  double one_device_loss = 0;
  std::vector<Tensor> one_device_grads;
  for (const char* devices : {"cpu:0", "cpu:0,cpu:1,cpu:2", "cpu:0,cpu:1,cpu:2,cpu:3"}) {
    SCOPED_TRACE(devices);
    auto model = std::make_shared<Model>(linear_graph(3, 4), Device::cpu(0));
    TrainerOptions options;
    options.parallel.device_ids = parse_device_list(devices);
    Trainer trainer(model, options);
    const double loss = trainer.forward_backward({x}, t);
    if (one_device_grads.empty()) {
      one_device_loss = loss;
      for (const Tensor& g : trainer.gradients()) one_device_grads.push_back(g.clone());
    }
    EXPECT_NEAR(loss, one_device_loss, 1e-6);
    ASSERT_EQ(trainer.gradients().size(), 2u);
    for (size_t p = 0; p < 2; ++p)
      for (int64_t i = 0; i < one_device_grads[p].numel(); ++i)
        EXPECT_NEAR(trainer.gradients()[p].data<float>()[i], one_device_grads[p].data<float>()[i],
                    1e-6)
            << trainer.parameter_names()[p] << " " << i;

    // Nothing to average: the loss is 0 and so is every gradient (not 0/0).
    EXPECT_EQ(trainer.forward_backward({x}, all_ignored), 0.0);
    for (const Tensor& g : trainer.gradients())
      for (int64_t i = 0; i < g.numel(); ++i) EXPECT_EQ(g.data<float>()[i], 0.0f);
  }
}

TEST(Trainer, CompilesTheTrainingGraphWithTheModelsPlanOptions) {
  for (bool tf32 : {false, true}) {
    auto model = std::make_shared<Model>(linear_graph(3, 2), Device::cpu(0),
                                         ModelOptions{.plan = {.allow_tf32 = tf32}});
    TrainerOptions options;
    options.training.loss.kind = LossKind::Mse;
    Trainer trainer(model, options);
    EXPECT_EQ(trainer.training_model().plan()->options().allow_tf32, tf32);
  }
}

TEST(Trainer, StepUpdatesTheModelAndRefreshesReplicas) {
  Tensor x = random_floats({6, 3}, 31), t = random_floats({6, 2}, 32);
  auto run = [&](const char* devices) {
    auto model = std::make_shared<Model>(linear_graph(3, 2), Device::cpu(0));
    TrainerOptions options;
    options.training.loss.kind = LossKind::Mse;
    options.parallel.device_ids = parse_device_list(devices);
    Trainer trainer(model, options);
    Sgd sgd(trainer.parameters(), {.lr = 0.1, .momentum = 0.9});
    std::vector<double> losses;
    for (int s = 0; s < 4; ++s) losses.push_back(trainer.step({x}, t, sgd));
    EXPECT_LT(losses.back(), losses.front());
    return std::make_pair(losses, model->parameter("W").clone());
  };
  auto [one_losses, one_w] = run("cpu:0");
  auto [two_losses, two_w] = run("cpu:0,cpu:1");
  for (size_t s = 0; s < one_losses.size(); ++s) EXPECT_NEAR(two_losses[s], one_losses[s], 1e-6);
  for (int64_t i = 0; i < one_w.numel(); ++i)
    EXPECT_NEAR(two_w.data<float>()[i], one_w.data<float>()[i], 1e-6);
  // Two runs with the same devices are bitwise identical.
  auto [again_losses, again_w] = run("cpu:0,cpu:1");
  EXPECT_EQ(again_losses, two_losses);
  for (int64_t i = 0; i < two_w.numel(); ++i)
    EXPECT_EQ(again_w.data<float>()[i], two_w.data<float>()[i]);
}

// x [N, 2, 3] -> BatchNormalization in training mode (momentum 0.8: PyTorch's 0.2) -> y, with
// the running statistics written back as the loader records them.
std::shared_ptr<Graph> batch_norm_graph() {
  auto g = std::make_shared<Graph>();
  g->name = "bn";
  g->opset_imports[""] = 15;
  g->inputs.push_back(
      {"x", {DType::Float32, SymbolicShape{Dim::named("N"), Dim::known(2), Dim::known(3)}}});
  g->initializers["scale"] = floats({2}, {1.5f, 0.5f});
  g->initializers["bias"] = floats({2}, {0.1f, -0.2f});
  g->initializers["mean"] = floats({2}, {0.3f, -0.1f});
  g->initializers["var"] = floats({2}, {1.2f, 0.7f});
  Node bn = make_node("BatchNormalization", {"x", "scale", "bias", "mean", "var"},
                      {"y", "mean_out", "var_out"});
  bn.name = "bn";
  bn.attributes["training_mode"].i = 1;
  bn.attributes["momentum"].kind = Attribute::Kind::Float;
  bn.attributes["momentum"].f = 0.8f;
  g->nodes.push_back(bn);
  g->outputs.push_back({"y", {DType::Float32, std::nullopt}});
  g->state_updates = {{"mean_out", "mean"}, {"var_out", "var"}};
  return g;
}

TEST(Trainer, BatchNormRunningVarianceIsUnbiasedAsPyTorchKeepsIt) {
  // PyTorch: running_var = 0.8 running_var + 0.2 * var * n / (n - 1), var the population
  // variance of the chunk replica 0 ran and n its elements per channel (rows * 3).
  Tensor x = random_floats({5, 2, 3}, 41), t = random_floats({5, 2, 3}, 42);
  for (const char* devices : {"cpu:0", "cpu:0,cpu:1"}) {
    SCOPED_TRACE(devices);
    auto model = std::make_shared<Model>(batch_norm_graph(), Device::cpu(0));
    TrainerOptions options;
    options.training.loss.kind = LossKind::Mse;
    options.parallel.device_ids = parse_device_list(devices);
    Trainer trainer(model, options);
    trainer.forward_backward({x}, t);
    const int64_t rows = std::string(devices) == "cpu:0" ? 5 : 3;  // chunks of 3 and 2
    const double n = static_cast<double>(rows * 3);
    for (int64_t c = 0; c < 2; ++c) {
      double sum = 0, sq = 0;
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < 3; ++j) sum += x.data<float>()[(i * 2 + c) * 3 + j];
      double mean = sum / n;
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < 3; ++j) {
          double d = x.data<float>()[(i * 2 + c) * 3 + j] - mean;
          sq += d * d;
        }
      double unbiased = sq / (n - 1);
      double mean0 = c == 0 ? 0.3 : -0.1, var0 = c == 0 ? 1.2 : 0.7;
      EXPECT_NEAR(model->parameter("mean").data<float>()[c], 0.8 * mean0 + 0.2 * mean, 1e-6);
      EXPECT_NEAR(model->parameter("var").data<float>()[c], 0.8 * var0 + 0.2 * unbiased, 1e-6);
    }
  }
  // The exported training graph leaves the write-back to its caller, as before.
  TrainingGraphSpec spec;
  spec.loss.kind = LossKind::Mse;
  EXPECT_TRUE(exportable_training_graph(build_training_graph(*batch_norm_graph(), spec))
                  .state_updates.empty());
}

// The PyTorch pattern, backward then optimizer.step, with no call telling the trainer that
// the parameters changed: every replica must still see the update before the next step.
TEST(Trainer, ForwardBackwardThenOptimizerStepEqualsStep) {
  Tensor x = random_floats({6, 3}, 41), t = random_floats({6, 2}, 42);
  auto run = [&](bool split_calls) {
    auto model = std::make_shared<Model>(linear_graph(3, 2), Device::cpu(0));
    TrainerOptions options;
    options.training.loss.kind = LossKind::Mse;
    options.parallel.device_ids = parse_device_list("cpu:0,cpu:1");
    Trainer trainer(model, options);
    Sgd sgd(trainer.parameters(), {.lr = 0.1, .momentum = 0.9});
    std::vector<double> losses;
    for (int s = 0; s < 4; ++s) {
      if (split_calls) {
        losses.push_back(trainer.forward_backward({x}, t));
        sgd.step(trainer.gradients());
      } else {
        losses.push_back(trainer.step({x}, t, sgd));
      }
    }
    return losses;
  };
  EXPECT_EQ(run(true), run(false));
}

// step() on several devices sums the replicas' gradients, updates and copies the new values
// to the replicas in one pass over the devices' workers: exactly the losses and parameters of
// forward_backward followed by optimizer.step, with and without a frozen parameter and with
// fewer chunks than devices.
TEST(Trainer, FusedStepEqualsSeparateCalls) {
  // W has 300 x 200 elements: the fused pass is split over the workers.
  Tensor x = random_floats({6, 300}, 51), t = random_floats({6, 200}, 52);
  Tensor x2 = random_floats({2, 300}, 53), t2 = random_floats({2, 200}, 54);
  struct Result {
    std::vector<double> losses;
    Tensor w, b;
  };
  auto run = [&](bool fused, bool freeze_b) {
    auto model = std::make_shared<Model>(linear_graph(300, 200), Device::cpu(0));
    TrainerOptions options;
    options.training.loss.kind = LossKind::Mse;
    options.parallel.device_ids = parse_device_list("cpu:0,cpu:1,cpu:2");
    if (freeze_b) options.training.freeze = {"b"};
    Trainer trainer(model, options);
    Sgd sgd(trainer.parameters(), {.lr = 0.1, .momentum = 0.9});
    Result result;
    for (int s = 0; s < 5; ++s) {
      const Tensor& in = s % 2 ? x2 : x;  // 2 rows: two of the three replicas run
      const Tensor& target = s % 2 ? t2 : t;
      if (fused) {
        result.losses.push_back(trainer.step({in}, target, sgd));
      } else {
        result.losses.push_back(trainer.forward_backward({in}, target));
        sgd.step(trainer.gradients());
      }
    }
    result.w = model->parameter("W").clone();
    result.b = model->parameter("b").clone();
    return result;
  };
  for (bool freeze_b : {false, true}) {
    SCOPED_TRACE(freeze_b ? "b frozen" : "b trained");
    Result fused = run(true, freeze_b), separate = run(false, freeze_b);
    EXPECT_EQ(fused.losses, separate.losses);
    for (const auto& [got, want] : {std::pair{fused.w, separate.w}, {fused.b, separate.b}})
      for (int64_t i = 0; i < want.numel(); ++i)
        ASSERT_EQ(got.data<float>()[i], want.data<float>()[i]) << i;
  }
  // An optimizer over other parameters is refused, as optimizer.step refuses it.
  auto model = std::make_shared<Model>(linear_graph(300, 200), Device::cpu(0));
  TrainerOptions options;
  options.training.loss.kind = LossKind::Mse;
  options.parallel.device_ids = parse_device_list("cpu:0,cpu:1");
  Trainer trainer(model, options);
  Sgd only_w({model->parameter("W")}, {.lr = 0.1});
  try {
    trainer.step({x}, t, only_w);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "optimizer: 2 gradients for 1 parameters");
  }
}

TEST(Trainer, TargetErrors) {
  auto model = std::make_shared<Model>(linear_graph(3, 2), Device::cpu(0));
  TrainerOptions options;
  options.training.loss.kind = LossKind::Mse;
  Trainer trainer(model, options);
  try {
    trainer.forward_backward({random_floats({4, 3}, 1)});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "the mse loss needs a target");
  }
  // Class targets of another dtype are named as the model names a wrong input, also on several
  // devices, where the scatter counts the targets a class loss ignores.
  for (const char* devices : {"cpu:0", "cpu:0,cpu:1"}) {
    SCOPED_TRACE(devices);
    TrainerOptions classes;
    classes.parallel.device_ids = parse_device_list(devices);
    Trainer classifier(std::make_shared<Model>(linear_graph(3, 4), Device::cpu(0)), classes);
    EXPECT_EQ(testing::error_of([&] {
                classifier.forward_backward({random_floats({4, 3}, 1)}, random_floats({4}, 2));
              }),
              "input 'target' expects dtype int64 but got float32");
  }
}

}  // namespace
}  // namespace dprun
