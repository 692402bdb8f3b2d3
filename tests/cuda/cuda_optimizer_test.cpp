// The optimizers' and the loss scaler's update kernels on CUDA: every update of the ai.dprun domain
// has a CPU and a CUDA definition over the same dtypes, and on a GPU the update gives the host's
// bits.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>

#include "cuda_test_util.h"
#include "engine/training/optimizer.h"

namespace dprun {
namespace {

TEST(CudaOptimizerKernels, EveryUpdateHasACpuAndACudaDefinition) {
  std::map<DeviceType, std::map<std::string, std::vector<DType>>> defined;
  for (const KernelDef& def : KernelRegistry::instance().definitions())
    if (def.domain == kDprunDomain) defined[def.device][def.op_type] = def.dtypes;
  const std::vector<DType> floats = {DType::Float32, DType::Float64};
  for (const char* op :
       {kSgdUpdateOp, kAdamUpdateOp, kScaleGradientOp, kGradientNormOp, kAddGradientOp}) {
    SCOPED_TRACE(op);
    ASSERT_TRUE(defined[DeviceType::CPU].count(op));
    ASSERT_TRUE(defined[DeviceType::CUDA].count(op));
    EXPECT_EQ(defined[DeviceType::CPU][op], floats);
    EXPECT_EQ(defined[DeviceType::CUDA][op], floats);
  }
  // Nothing of the domain exists on one device type only.
  std::set<std::string> cpu_ops, cuda_ops;
  for (const auto& [op, dtypes] : defined[DeviceType::CPU]) cpu_ops.insert(op);
  for (const auto& [op, dtypes] : defined[DeviceType::CUDA]) cuda_ops.insert(op);
  EXPECT_EQ(cpu_ops, cuda_ops);
  // Finding the CUDA kernels asks nothing of a GPU.
  EXPECT_NE(dynamic_cast<SgdUpdateKernel*>(
                create_update_kernel(kSgdUpdateOp, DeviceType::CUDA, DType::Float32).get()),
            nullptr);
  EXPECT_NE(dynamic_cast<AdamUpdateKernel*>(
                create_update_kernel(kAdamUpdateOp, DeviceType::CUDA, DType::Float64).get()),
            nullptr);
  EXPECT_NE(dynamic_cast<GradientScaleKernel*>(
                create_update_kernel(kScaleGradientOp, DeviceType::CUDA, DType::Float32).get()),
            nullptr);
}

Tensor random_floats(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1, 1);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = dist(rng);
  return Tensor::from_vector<float>({n}, v);
}

// Three steps of `make(parameters)` on cpu:0 and on cuda:0 from the same values and gradients.
template <class MakeOptimizer>
void expect_gpu_steps_equal_host_steps(MakeOptimizer make) {
  constexpr int64_t kN = 100003;  // several blocks and a remainder
  Tensor host = random_floats(kN, 1);
  Tensor gpu = host.to(Device::cuda(0), /*copy=*/true);
  auto on_host = make(std::vector<Tensor>{host});
  auto on_gpu = make(std::vector<Tensor>{gpu});
  for (uint32_t step = 0; step < 3; ++step) {
    Tensor g = random_floats(kN, 10 + step);
    on_host->step({g});
    on_gpu->step({g});  // copied to cuda:0 by the optimizer
    Tensor back = gpu.to(Device::cpu());
    for (int64_t i = 0; i < kN; ++i)
      ASSERT_EQ(back.data<float>()[i], host.data<float>()[i]) << "step " << step << ", " << i;
  }
}

TEST(CudaOptimizerKernels, GpuUpdatesGiveTheHostsBits) {
  DPRUN_REQUIRE_CUDA_GPU();
  expect_gpu_steps_equal_host_steps([](std::vector<Tensor> p) {
    return std::make_unique<Sgd>(
        std::move(p),
        SgdOptions{.lr = 0.1, .momentum = 0.9, .dampening = 0.1, .weight_decay = 0.01});
  });
  expect_gpu_steps_equal_host_steps([](std::vector<Tensor> p) {
    return std::make_unique<Sgd>(std::move(p),
                                 SgdOptions{.lr = 0.1, .momentum = 0.9, .nesterov = true});
  });
  expect_gpu_steps_equal_host_steps([](std::vector<Tensor> p) {
    return std::make_unique<Adam>(std::move(p), AdamOptions{.lr = 0.01, .weight_decay = 0.1});
  });
  expect_gpu_steps_equal_host_steps([](std::vector<Tensor> p) {
    return std::make_unique<Adam>(
        std::move(p), AdamOptions{.lr = 0.01, .weight_decay = 0.1, .decoupled_weight_decay = true});
  });
}

}  // namespace
}  // namespace dprun
