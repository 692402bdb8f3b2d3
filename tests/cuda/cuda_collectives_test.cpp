// NCCL collectives behind comm.h (engine/backends/cuda/nccl_collectives.h): broadcast and
// reduce across every GPU against the host's copies and sums, the clique cache, and the dtypes
// NCCL sums. Those that need GPUs skip, saying why, where there are not enough.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "cuda_test_util.h"
#include "engine/backends/cuda/nccl_clique.h"
#include "engine/backends/cuda/nccl_collectives.h"
#include "engine/parallel/comm.h"
#include "engine/parallel/device_list.h"

namespace dprun {
namespace {

template <class T>
Tensor random_tensor(Shape shape, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> dist(-1, 1);
  Tensor t = Tensor::empty(shape, dtype_of<T>());
  for (int64_t i = 0; i < t.numel(); ++i) t.data<T>()[i] = static_cast<T>(dist(rng));
  return t;
}

template <class T>
std::vector<T> host_values(const Tensor& t) {
  Tensor h = t.to(Device::cpu());
  return std::vector<T>(h.data<T>(), h.data<T>() + h.numel());
}

TEST(CudaCollectives, NcclSumsTheFloatTypesOnly) {
  EXPECT_EQ(nccl_sum_type(DType::Float32), ncclFloat32);
  EXPECT_EQ(nccl_sum_type(DType::Float64), ncclFloat64);
  EXPECT_EQ(nccl_sum_type(DType::Float16), ncclFloat16);
  EXPECT_EQ(nccl_sum_type(DType::BFloat16), ncclBfloat16);
  for (DType t : {DType::Int32, DType::Int64, DType::UInt8, DType::Bool}) {
    try {
      nccl_sum_type(t);
      FAIL() << "expected an Error for " << dtype_name(t);
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()),
                "reduce_add on CUDA GPUs: NCCL sums float32, float64, float16 and bfloat16 "
                "tensors, not " +
                    std::string(dtype_name(t)));
    }
  }
}

TEST(CudaCollectives, BroadcastToEveryGpuCopiesEveryByte) {
  DPRUN_REQUIRE_CUDA_GPUS(2);
  std::vector<Device> gpus = all_devices();
  Tensor ints = Tensor::from_vector<int64_t>({3}, {1, -2, int64_t(1) << 40});
  std::vector<Tensor> host = {random_tensor<float>({33, 7}, 1), random_tensor<double>({5}, 2), ints,
                              Tensor::empty({0, 4}, DType::Float32)};
  std::vector<Tensor> sources;
  for (const Tensor& t : host) sources.push_back(t.to(gpus[0]));
  std::vector<std::vector<Tensor>> copies = broadcast_coalesced(sources, gpus);
  ASSERT_EQ(copies.size(), gpus.size());
  for (size_t d = 1; d < gpus.size(); ++d) {
    SCOPED_TRACE(gpus[d].to_string());
    EXPECT_EQ(copies[d][0].device(), gpus[d]);
    EXPECT_EQ(host_values<float>(copies[d][0]), host_values<float>(host[0]));
    EXPECT_EQ(host_values<double>(copies[d][1]), host_values<double>(host[1]));
    EXPECT_EQ(host_values<int64_t>(copies[d][2]), host_values<int64_t>(host[2]));
    EXPECT_EQ(copies[d][3].shape(), (Shape{0, 4}));
  }
}

TEST(CudaCollectives, ReduceAcrossEveryGpuMatchesTheHostSum) {
  DPRUN_REQUIRE_CUDA_GPUS(2);
  std::vector<Device> gpus = all_devices();
  std::vector<std::vector<Tensor>> host(gpus.size()), inputs(gpus.size());
  for (size_t d = 0; d < gpus.size(); ++d) {
    host[d] = {random_tensor<float>({1000, 3}, static_cast<uint32_t>(10 + d)),
               random_tensor<double>({17}, static_cast<uint32_t>(20 + d))};
    for (const Tensor& t : host[d]) inputs[d].push_back(t.to(gpus[d]));
  }
  std::vector<Tensor> expected = reduce_add_coalesced(host, Device::cpu());
  for (Device destination : {gpus[0], gpus.back()}) {
    SCOPED_TRACE(destination.to_string());
    std::vector<Tensor> sums = reduce_add_coalesced(inputs, destination);
    ASSERT_EQ(sums.size(), 2u);
    EXPECT_EQ(sums[0].device(), destination);
    std::vector<float> f = host_values<float>(sums[0]), fe = host_values<float>(expected[0]);
    std::vector<double> g = host_values<double>(sums[1]), ge = host_values<double>(expected[1]);
    // a + b does not depend on the order of its addends: two GPUs give the host's bits.
    for (size_t i = 0; i < f.size(); ++i)
      if (gpus.size() == 2)
        ASSERT_EQ(f[i], fe[i]) << i;
      else
        ASSERT_NEAR(f[i], fe[i], 1e-6 * static_cast<double>(gpus.size())) << i;
    for (size_t i = 0; i < g.size(); ++i) ASSERT_NEAR(g[i], ge[i], 1e-14) << i;
  }
}

TEST(CudaCollectives, IntegerSumsOnGpusAreRefusedBeforeNcclRuns) {
  DPRUN_REQUIRE_CUDA_GPUS(2);
  std::vector<Device> gpus = all_devices();
  std::vector<std::vector<Tensor>> inputs;
  for (size_t d = 0; d < 2; ++d)
    inputs.push_back({Tensor::from_vector<int32_t>({2}, {1, 2}).to(gpus[d])});
  try {
    reduce_add_coalesced(inputs, gpus[0]);
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "reduce_add on CUDA GPUs: NCCL sums float32, float64, float16 and bfloat16 "
                 "tensors, not int32");
  }
}

TEST(CudaCollectives, OneCliquePerOrderedGpuListUntilReleased) {
  DPRUN_REQUIRE_CUDA_GPUS(2);
  release_nccl_cliques();
  std::shared_ptr<NcclClique> a = nccl_clique({0, 1});
  EXPECT_EQ(nccl_clique({0, 1}), a);
  EXPECT_EQ(a->size(), 2);
  EXPECT_EQ(a->name(), "cuda:0,cuda:1");
  std::shared_ptr<NcclClique> b = nccl_clique({1, 0});
  EXPECT_NE(b, a);
  EXPECT_EQ(b->device(0), 1);
  EXPECT_EQ(nccl_clique_count(), 2u);
  a.reset();
  b.reset();
  release_nccl_cliques();  // destroys both communicators here, while CUDA is up
  EXPECT_EQ(nccl_clique_count(), 0u);
  // The next collective makes its clique again.
  std::vector<Tensor> copies =
      broadcast_coalesced({Tensor::from_vector<float>({1}, {3}).to(Device::cuda(0))},
                          {Device::cuda(0), Device::cuda(1)})[1];
  EXPECT_EQ(host_values<float>(copies[0]), std::vector<float>{3});
  EXPECT_EQ(nccl_clique_count(), 1u);
}

}  // namespace
}  // namespace dprun
