// Synchronized BatchNormalization (engine/autograd/sync_batch_norm.h) and what it is built on:
// the replica group's sums (engine/parallel/replica_group.h), AllReduceSum and its gradient.
// References: the plain BatchNormalization kernel and gradient rule (itself checked by finite
// differences), and a one-device training run on the whole batch, which synchronized
// replicas must reproduce.
#include <gtest/gtest.h>

#include <cmath>
#include <thread>

#include "bundled_model_util.h"
#include "engine/autograd/sync_batch_norm.h"
#include "engine/parallel/device_list.h"
#include "engine/parallel/parallel_apply.h"
#include "engine/parallel/replica_group.h"
#include "engine/rewrites/rewrite_domain.h"
#include "engine/training/optimizer.h"
#include "engine/training/trainer.h"
#include "gradient_check.h"
#include "loader/npy.h"
#include "loader/onnx_loader.h"

namespace dprun {
namespace {

using namespace dprun::testing;

// ---- the replica group ----

// Runs fn(r) for every replica r on its own thread; returns each one's error message ("" when
// it returned).
std::vector<std::string> on_threads(size_t n, const std::function<void(size_t)>& fn) {
  std::vector<std::string> errors(n);
  std::vector<std::thread> threads;
  for (size_t r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      try {
        fn(r);
      } catch (const Error& e) {
        errors[r] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  return errors;
}

TEST(ReplicaGroup, SumsInReplicaOrderWhateverTheTiming) {
  // In float32, (1e8 + 1) - 1e8 is 0 and 1e8 + (1 - 1e8) is 1e8 - 1e8 = 0 too, but
  // (1 + -1e8) + 1e8 is 0 only in this order: the result shows the order.
  const std::vector<float> parts = {1.f, -1e8f, 1e8f};
  for (int trial = 0; trial < 20; ++trial) {
    ReplicaGroup group(3);
    std::vector<Tensor> sums(3);
    auto errors = on_threads(3, [&](size_t r) {
      if ((r + trial) % 3 == 0) std::this_thread::yield();
      sums[r] = group.all_reduce_sum(r, "k", Tensor::from_vector<float>({1}, {parts[r]}));
    });
    for (size_t r = 0; r < 3; ++r) {
      EXPECT_EQ(errors[r], "");
      EXPECT_EQ(sums[r].data<float>()[0], (1.f + -1e8f) + 1e8f);
    }
  }
}

TEST(ReplicaGroup, ReplicasThatWaitInDifferentSumsStop) {
  // Replica 1 reaches "b" first while replica 0 waits in "a": neither can go on.
  ReplicaGroup group(2);
  auto errors = on_threads(2, [&](size_t r) {
    for (const char* key :
         r == 0 ? std::vector<const char*>{"a", "b"} : std::vector<const char*>{"b", "a"})
      group.all_reduce_sum(r, key, Tensor::scalar<double>(1.0));
  });
  const std::string want =
      "the sum over the replicas stopped: the replicas wait in different sums (replica 0 in "
      "'a', replica 1 in 'b')";
  EXPECT_EQ(errors, (std::vector<std::string>{want, want}));
}

TEST(ReplicaGroup, SumsOneCollectiveAfterAnother) {
  ReplicaGroup group(3);
  std::vector<std::vector<double>> sums(3);
  auto errors = on_threads(3, [&](size_t r) {
    for (int k = 0; k < 50; ++k) {
      const Tensor part = Tensor::scalar<double>(static_cast<double>(r * k));
      sums[r].push_back(group.all_reduce_sum(r, std::to_string(k), part).item_as_double());
    }
  });
  for (size_t r = 0; r < 3; ++r) {
    EXPECT_EQ(errors[r], "");
    for (int k = 0; k < 50; ++k) ASSERT_EQ(sums[r][k], 3.0 * k) << r << " " << k;
  }
}

TEST(ReplicaGroup, AReplicaThatLeavesEndsTheWait) {
  for (bool failed : {true, false}) {
    ReplicaGroup group(3);
    auto errors = on_threads(3, [&](size_t r) {
      if (r == 1) return group.leave(1, failed);
      group.all_reduce_sum(r, "k", Tensor::scalar<float>(1.f));
    });
    const std::string why =
        failed ? "replica 1 failed" : "replica 1 finished its run without taking part";
    EXPECT_EQ(errors[0], "the sum over the replicas stopped: " + why);
    EXPECT_EQ(errors[1], "");
    EXPECT_EQ(errors[2], "the sum over the replicas stopped: " + why);
  }
}

TEST(ReplicaGroup, NamesTensorsThatDisagree) {
  ReplicaGroup group(2);
  auto errors = on_threads(2, [&](size_t r) {
    group.all_reduce_sum(
        r, "k", r == 0 ? Tensor::zeros({2}, DType::Float32) : Tensor::zeros({3}, DType::Float32));
  });
  const std::string want =
      "the sum over the replicas: replica 1's float32[3] on cpu:0 differs from replica 0's "
      "float32[2] on cpu:0";
  EXPECT_EQ(errors, (std::vector<std::string>{want, want}));
}

// ---- AllReduceSum ----

Node all_reduce_node(const std::string& in, const std::string& out) {
  Node n = node("AllReduceSum", {in}, {out});
  n.domain = kRewriteDomain;
  n.name = "sum";
  return n;
}

[[maybe_unused]] const bool all_reduce_case = register_gradient_case(
    std::string(kRewriteDomain) + ".AllReduceSum", "AllReduceSumOnItsOwn", [] {
      // Run on its own the sum is the value itself, and so is the gradient's.
      check_gradients({node("Mul", {"x", "x"}, {"sq"}), all_reduce_node("sq", "y")},
                      {in("x", {2, 3}, 1)}, "y", {"x"}, 17, Decl::Full);
    });

TEST(AllReduceSum, SumsOverTheReplicasOfParallelApplyAndNamesAReplicaThatFailed) {
  auto g = make_graph({all_reduce_node("x", "y")}, {{"x", Tensor::zeros({2}, DType::Float32)}}, "y",
                      17, Decl::Full);
  std::vector<std::shared_ptr<Model>> replicas = {std::make_shared<Model>(g, Device::cpu(0)),
                                                  std::make_shared<Model>(g, Device::cpu(1)),
                                                  std::make_shared<Model>(g, Device::sim(0))};
  const auto x = [](float a, float b) { return Tensor::from_vector<float>({2}, {a, b}); };
  auto out = parallel_apply(replicas, {{x(1, 2)}, {x(10, 20)}, {x(100, 200)}});
  for (const auto& o : out) {
    const Tensor y = o[0].to(Device::cpu());
    EXPECT_EQ(std::vector<float>(y.data<float>(), y.data<float>() + 2),
              (std::vector<float>{111, 222}));
  }
  // Replica 1 fails at its input: replica 0 stops waiting instead of hanging.
  try {
    parallel_apply({replicas[0], replicas[1]},
                   {{x(1, 2)}, {Tensor::from_vector<int64_t>({2}, {1, 2})}});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "2 of 2 replicas failed: replica 0 on cpu:0: [AllReduceSum] node 'sum': the sum "
                 "over the replicas stopped: replica 1 failed; replica 1 on cpu:1: input 'x' "
                 "expects dtype float32 but got int64");
  }
}

// ---- synchronized BatchNormalization on its own ----

// X [4, 3, 5] -> BatchNormalization in training mode (momentum 0.7) -> Y, running stats out.
std::shared_ptr<Graph> batch_norm_graph(int64_t opset) {
  std::vector<Input> inputs = {in("x", {4, 3, 5}, 1), in("scale", {3}, 2, 0.5, 2), in("b", {3}, 3),
                               in("mean", {3}, 4), in("var", {3}, 5, 0.5, 1.5)};
  for (size_t i = 3; i < inputs.size(); ++i) inputs[i].constant = true;
  std::map<std::string, Attribute> attrs = {{"momentum", Attribute::of_float(0.7f)}};
  if (opset >= 14) attrs["training_mode"] = Attribute::of_int(1);
  auto g = make_graph(
      {node("BatchNormalization", {"x", "scale", "b", "mean", "var"}, {"y", "rm", "rv"}, attrs)},
      inputs, "y", opset, Decl::Full);
  g->outputs = {{"y", {}}, {"rm", {}}, {"rv", {}}};
  return g;
}

TEST(SyncBatchNorm, OnItsOwnEqualsTheKernelAndKeepsPyTorchsRunningVariance) {
  for (int64_t opset : {9, 15}) {
    SCOPED_TRACE(opset);
    auto plain = batch_norm_graph(opset);
    auto synced = std::make_shared<Graph>(*plain);
    synchronize_batch_norms(*synced);
    EXPECT_EQ(std::count_if(synced->nodes.begin(), synced->nodes.end(),
                            [](const Node& n) { return n.op_type == "AllReduceSum"; }),
              3);
    const std::vector<Tensor> feeds = {in("x", {4, 3, 5}, 1).value,
                                       in("scale", {3}, 2, 0.5, 2).value, in("b", {3}, 3).value};
    const auto want = Model(plain, Device::cpu()).run(feeds);
    const auto got = Model(synced, Device::cpu()).run(feeds);
    for (int64_t i = 0; i < want[0].numel(); ++i)
      ASSERT_NEAR(got[0].item_as_double(i), want[0].item_as_double(i), 1e-12) << "Y " << i;
    const Tensor running_var = plain->initializers.at("var");
    const double m = 0.7f;  // the attribute is a float
    for (int64_t c = 0; c < 3; ++c) {
      EXPECT_NEAR(got[1].item_as_double(c), want[1].item_as_double(c), 1e-12);
      // The kernel's running variance takes the population variance; PyTorch's the unbiased
      // one, var * n / (n - 1) with n = 4 * 5 elements per channel.
      const double var = (want[2].item_as_double(c) - m * running_var.item_as_double(c)) / (1 - m);
      EXPECT_NEAR(got[2].item_as_double(c),
                  m * running_var.item_as_double(c) + (1 - m) * var * 20 / 19, 1e-12);
    }
  }
}

TEST(SyncBatchNorm, OnItsOwnHasTheRulesGradients) {
  // The gradient builder differentiates the synchronized form through AllReduceSum's rule; on
  // its own it must give the BatchNormalization rule's gradients.
  auto gradients = [](std::shared_ptr<Graph> g) {
    g->outputs.resize(1);
    GradientResult r;
    auto train = training_graph(*g, {"x", "scale", "b"}, &r);
    const Tensor dy = random_tensor({4, 3, 5}, -1, 1, 9);
    return Model(train, Device::cpu())
        .run({in("x", {4, 3, 5}, 1).value, in("scale", {3}, 2, 0.5, 2).value, in("b", {3}, 3).value,
              dy});
  };
  auto plain = batch_norm_graph(15);
  auto synced = std::make_shared<Graph>(*plain);
  synchronize_batch_norms(*synced);
  const auto want = gradients(plain), got = gradients(synced);
  // The backward pass sums over the replicas twice (the gradients of the sum and of the
  // squared deviations); the element count has none.
  GradientResult r;
  synced->outputs.resize(1);
  training_graph(*synced, {"x", "scale", "b"}, &r);
  EXPECT_EQ(std::count_if(r.nodes.begin(), r.nodes.end(),
                          [](const Node& n) {
                            return n.op_type == "AllReduceSum" && n.domain == kRewriteDomain;
                          }),
            2);
  ASSERT_EQ(got.size(), 3u);
  for (size_t k = 0; k < 3; ++k)
    for (int64_t i = 0; i < want[k].numel(); ++i)
      ASSERT_NEAR(got[k].item_as_double(i), want[k].item_as_double(i), 1e-11)
          << "gradient " << k << " element " << i;
}

// synchronize_batch_norms(g)'s error message, "" when it takes the graph.
std::string sync_error(Graph& g) {
  try {
    synchronize_batch_norms(g);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(SyncBatchNorm, NamesANodeItCannotSynchronize) {
  EXPECT_EQ(sync_error(*batch_norm_graph(8)),
            "[BatchNormalization] node 'BatchNormalization_fwd': synchronized batch statistics "
            "need ai.onnx opset 9 or later, got 8");
  auto g = batch_norm_graph(9);
  g->nodes[0].outputs.push_back("saved_mean");
  EXPECT_EQ(sync_error(*g),
            "[BatchNormalization] node 'BatchNormalization_fwd': synchronized batch statistics "
            "do not make saved_mean and saved_var (outputs 3 and 4)");
}

// ---- training over several devices ----

struct Trained {
  std::vector<double> losses;
  std::map<std::string, Tensor> parameters;  // BatchNorm running statistics included
};

// Three SGD steps of the bundled CNN with training-mode BatchNorm on `devices`, batch 10.
Trained train_cnn(const std::string& devices, bool sync) {
  const std::string dir = std::string(DPRUN_SOURCE_DIR_DEFAULT) + "/models/training/";
  auto model = std::make_shared<Model>(load_model(dir + "cnn_bn_1dev.onnx", Device::cpu(0)));
  const Tensor x = read_npy(dir + "cnn_bn_1dev.x.npy");
  const Tensor t = read_npy(dir + "cnn_bn_1dev.target.npy");
  TrainerOptions options;
  options.training.loss.kind = LossKind::CrossEntropy;
  options.training.sync_batch_norm = sync;
  options.parallel.device_ids = parse_device_list(devices);
  Trainer trainer(model, options);
  Sgd sgd(trainer.parameters(), {.lr = 0.1, .momentum = 0.9});
  Trained out;
  for (int64_t step = 0; step < 3; ++step) {
    const int64_t begin = step * 10 % x.dim(0);
    out.losses.push_back(trainer.step({x.narrow(0, begin, 10)}, t.narrow(0, begin, 10), sgd));
  }
  for (const std::string& name : model->parameter_names())
    out.parameters[name] = model->parameter(name).to(Device::cpu()).clone();
  return out;
}

TEST(SyncBatchNorm, ReplicasTrainAsOneDeviceOnTheWholeBatch) {
  const Trained one = train_cnn("cpu:0", false);
  for (const char* devices : {"cpu:0,cpu:1,cpu:2", "cpu:0,sim:0"}) {
    SCOPED_TRACE(devices);
    const Trained synced = train_cnn(devices, true);
    for (size_t s = 0; s < one.losses.size(); ++s)
      EXPECT_NEAR(synced.losses[s], one.losses[s], 1e-6 * one.losses[s]) << "step " << s;
    for (const auto& [name, want] : one.parameters) {
      const Tensor& got = synced.parameters.at(name);
      for (int64_t i = 0; i < want.numel(); ++i)
        ASSERT_NEAR(got.item_as_double(i), want.item_as_double(i),
                    1e-5 * (1 + std::abs(want.item_as_double(i))))
            << name << " element " << i;
    }
    // Without synchronization each replica normalizes by its own chunk: not the same step.
    const Trained apart = train_cnn(devices, false);
    EXPECT_GT(std::abs(apart.losses[1] - one.losses[1]), 1e-4);
  }
}

}  // namespace
}  // namespace dprun
