// The NCCL process group (engine/distributed/nccl_process_group.h): sums in GPU memory against the
// host's rank-order sums, its checks, the control collectives it passes on, and a
// DistributedDataParallel step on it against a Trainer. Ranks are threads of this process,
// one GPU each; tests skip, saying why, where there are not enough GPUs.
#include <gtest/gtest.h>

#include <random>
#include <thread>

#include "cuda_test_util.h"
#include "engine/distributed/nccl_process_group.h"
#include "engine/distributed/thread_process_group.h"
#include "engine/parallel/comm.h"
#include "engine/training/distributed_data_parallel.h"
#include "error_test_util.h"
#include "loader/npy.h"
#include "loader/onnx_loader.h"
#include "cuda/source_dir.h"

namespace dprun {
namespace {

template <class T>
std::vector<T> host_values(const Tensor& t) {
  Tensor h = t.to(Device::cpu());
  return std::vector<T>(h.data<T>(), h.data<T>() + h.numel());
}

template <class T>
Tensor random_tensor(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> dist(-1e3, 1e3);
  Tensor t = Tensor::empty({n}, dtype_of<T>());
  for (int64_t i = 0; i < n; ++i) t.data<T>()[i] = static_cast<T>(dist(rng));
  return t;
}

// Runs `body` once per rank, rank r on its own thread with an NCCL group on cuda:r made from a
// thread group; returns what each rank threw.
std::vector<std::string> run_nccl_ranks(
    int size,
    const std::function<void(ProcessGroup&, const std::shared_ptr<ProcessGroup>&)>& body) {
  auto bootstraps = make_thread_process_groups(size, {.timeout_seconds = 120});
  std::vector<std::string> errors(static_cast<size_t>(size));
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r)
    threads.emplace_back([&, r] {
      try {
        auto group = nccl_process_group(bootstraps[static_cast<size_t>(r)], Device::cuda(r),
                                        {.timeout_seconds = 120});
        body(*group, group);
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(r)] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  return errors;
}

TEST(NcclProcessGroup, OneRankKeepsItsTensorAndPassesControlOn) {
  DPRUN_REQUIRE_CUDA_GPU();
  auto errors = run_nccl_ranks(1, [](ProcessGroup& g, const std::shared_ptr<ProcessGroup>&) {
    EXPECT_EQ(g.backend(), "nccl");
    EXPECT_EQ(g.reduce_device(), Device::cuda(0));
    EXPECT_EQ(g.size(), 1);
    Tensor host = random_tensor<float>(1000, 1);
    Tensor t = host.to(Device::cuda(0));
    for (ReduceOrder order : {ReduceOrder::Any, ReduceOrder::RankOrder}) {
      auto work = g.all_reduce_sum(t, order);
      work->wait();
      EXPECT_TRUE(work->test());
      EXPECT_EQ(host_values<float>(t), host_values<float>(host));
    }
    EXPECT_EQ(all_gather_values<int64_t>(g, 42), std::vector<int64_t>{42});
    g.broadcast(t, 0);
    EXPECT_EQ(host_values<float>(t), host_values<float>(host));
    g.barrier();
    EXPECT_EQ(testing::error_of([&] { g.all_reduce_sum(host, ReduceOrder::Any); }),
              "all_reduce_sum on NCCL rank 0 of 1 on cuda:0: the tensor must be in cuda:0's "
              "memory, not float32[1000] on cpu:0");
  });
  EXPECT_EQ(errors, std::vector<std::string>(1));
}

TEST(NcclProcessGroup, TwoRanksSumAsTheHostInRankOrder) {
  DPRUN_REQUIRE_CUDA_GPUS(2);
  // Rank-order sums are the host's bit for bit; NCCL's own order too, for two addends.
  std::vector<Tensor> parts32 = {random_tensor<float>(100003, 2), random_tensor<float>(100003, 3)};
  std::vector<Tensor> parts64 = {random_tensor<double>(777, 4), random_tensor<double>(777, 5)};
  const std::vector<float> sum32 = host_values<float>(reduce_add(parts32, Device::cpu()));
  const std::vector<double> sum64 = host_values<double>(reduce_add(parts64, Device::cpu()));
  auto errors = run_nccl_ranks(2, [&](ProcessGroup& g, const std::shared_ptr<ProcessGroup>&) {
    const auto r = static_cast<size_t>(g.rank());
    for (ReduceOrder order : {ReduceOrder::Any, ReduceOrder::RankOrder}) {
      Tensor a = parts32[r].to(Device::cuda(g.rank()));
      Tensor b = parts64[r].to(Device::cuda(g.rank()));
      auto work_a = g.all_reduce_sum(a, order);
      auto work_b = g.all_reduce_sum(b, order);
      work_b->wait();
      work_a->wait();
      EXPECT_EQ(host_values<float>(a), sum32) << "rank " << r;
      EXPECT_EQ(host_values<double>(b), sum64) << "rank " << r;
    }
  });
  EXPECT_EQ(errors, std::vector<std::string>(2));
}

TEST(NcclProcessGroup, TwoRanksBroadcastGpuAndHostTensors) {
  DPRUN_REQUIRE_CUDA_GPUS(2);
  const std::vector<int64_t> from_rank1 = {1, 11, -7, int64_t{1} << 40};
  auto errors = run_nccl_ranks(2, [&](ProcessGroup& g, const std::shared_ptr<ProcessGroup>&) {
    const int64_t r = g.rank();
    Tensor mine = Tensor::from_vector<int64_t>({4}, {r, 10 + r, -7 * r, r << 40});
    Tensor on_gpu = mine.to(Device::cuda(g.rank()));
    g.broadcast(on_gpu, 1);  // NCCL
    EXPECT_EQ(host_values<int64_t>(on_gpu), from_rank1) << "rank " << r;
    g.broadcast(mine, 1);  // the bootstrap group
    EXPECT_EQ(host_values<int64_t>(mine), from_rank1) << "rank " << r;
    // Together: two GPU tensors in one NCCL group, and a host tensor.
    Tensor a = Tensor::from_vector<float>({2}, {float(r), 0.5f}).to(Device::cuda(g.rank()));
    Tensor b = Tensor::from_vector<double>({1}, {-double(r)}).to(Device::cuda(g.rank()));
    Tensor c = Tensor::from_vector<int64_t>({1}, {7 * r});
    g.broadcast_coalesced({a, b, c}, 1);
    EXPECT_EQ(host_values<float>(a), (std::vector<float>{1.0f, 0.5f})) << "rank " << r;
    EXPECT_EQ(host_values<double>(b), std::vector<double>{-1.0}) << "rank " << r;
    EXPECT_EQ(host_values<int64_t>(c), std::vector<int64_t>{7}) << "rank " << r;
  });
  EXPECT_EQ(errors, std::vector<std::string>(2));
}

TEST(NcclProcessGroup, ADistributedStepOnOneRankIsTheTrainersStep) {
  DPRUN_REQUIRE_CUDA_GPU();
  const std::string dir = dprun::testing::cuda_test_source_dir() + "/models/training/";
  Tensor x = read_npy(dir + "mlp_sgd.x.npy");            // [25, 12]
  Tensor target = read_npy(dir + "mlp_sgd.target.npy");  // [25]
  TrainerOptions options;
  options.training.loss.kind = LossKind::CrossEntropy;
  options.parallel.device_ids = {Device::cuda(0)};
  auto reference_model = std::make_shared<Model>(load_model(dir + "mlp_sgd.onnx", Device::cuda(0)));
  Trainer reference(reference_model, options);
  Sgd reference_sgd(reference.parameters(), {.lr = 0.1, .momentum = 0.9});
  std::vector<double> expected;
  for (int step = 0; step < 3; ++step)
    expected.push_back(reference.step({x}, target, reference_sgd));

  auto errors = run_nccl_ranks(1, [&](ProcessGroup&, const std::shared_ptr<ProcessGroup>& group) {
    auto model = std::make_shared<Model>(load_model(dir + "mlp_sgd.onnx", Device::cuda(0)));
    DistributedDataParallel ddp(model, options, group);
    Sgd sgd(ddp.trainer().parameters(), {.lr = 0.1, .momentum = 0.9});
    for (int step = 0; step < 3; ++step)
      EXPECT_EQ(ddp.step({x}, target, 25, 25, sgd), expected[static_cast<size_t>(step)]);
    for (const Tensor& g : ddp.gradients()) EXPECT_EQ(g.device(), Device::cuda(0));
    auto params = model->parameters();
    auto reference_params = reference_model->parameters();
    ASSERT_EQ(params.size(), reference_params.size());
    for (size_t i = 0; i < params.size(); ++i) {
      ASSERT_EQ(params[i].dtype(), DType::Float32);
      EXPECT_EQ(host_values<float>(params[i]), host_values<float>(reference_params[i]));
    }
  });
  EXPECT_EQ(errors, std::vector<std::string>(1));
}

}  // namespace
}  // namespace dprun
