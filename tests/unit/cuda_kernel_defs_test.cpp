// The CUDA kernels' definitions (ops/cuda/defs, every build) and their compute (ops/cuda, with
// the CUDA toolkit): each definition names a compute the toolkit's build supplies, each compute
// has a definition, and a build without the toolkit defines as many kernels as one with it.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>

#include "engine/backend.h"
#include "engine/cuda_plugin.h"
#include "engine/distributed/nccl_process_group.h"
#include "engine/kernel.h"
#include "error_test_util.h"
#include "graph_test_util.h"
#include "ops/cuda/defs/cuda_compute.h"

namespace dprun {
namespace {

// The definitions on CUDA of ai.onnx, the graph rewrites (dprun) and the optimizers
// (ai.dprun): the kernels of ops/cuda/defs (tests register CUDA kernels of their own only in
// domains of their own).
size_t cuda_definitions() {
  size_t n = 0;
  for (const KernelDef& d : KernelRegistry::instance().definitions())
    if (d.device == DeviceType::CUDA &&
        (d.domain.empty() || d.domain == "dprun" || d.domain == "ai.dprun"))
      ++n;
  return n;
}

TEST(CudaKernelDefs, EveryBuildDefinesEveryCudaKernel) {
  // The count of ops/cuda/defs' definitions: a build without the toolkit has them all, so it
  // plans for GPUs, and the simulated devices follow, as a build with it does.
  EXPECT_EQ(cuda_definitions(), 124u);
  EXPECT_EQ(cuda_compute_names_used().size(), 124u);
}

TEST(CudaKernelDefs, EveryDefinitionNamesASuppliedComputeAndEveryComputeIsNamed) {
  // The computes are the CUDA plugin's (engine/cuda_plugin.h): open it, if this process has
  // not yet (tests/cli/cuda_plugin_cli_test.cpp checks that a CPU run does not).
  const CudaPluginLoad& plugin = load_cuda_plugin();
  const std::vector<std::string> used = cuda_compute_names_used();
  std::vector<std::string> supplied = cuda_compute_names();
  std::erase_if(supplied, [](const std::string& n) { return n.starts_with("dprun.test."); });
#if DPRUN_WITH_CUDA
  // This machine has the CUDA libraries (CI's too): the plugin opens without a GPU.
  ASSERT_TRUE(plugin.loaded) << plugin.error;
  EXPECT_EQ(supplied, used);
  EXPECT_TRUE(nccl_supported());
#else
  EXPECT_FALSE(plugin.loaded);
  EXPECT_EQ(plugin.error, "this build of dprun has no CUDA support");
  EXPECT_TRUE(supplied.empty()) << supplied.front();
  EXPECT_FALSE(nccl_supported());
#endif
}

#if !DPRUN_WITH_CUDA
TEST(CudaKernelDefs, WithoutTheToolkitAPlanIsMadeAndItsKernelFailsNamingItself) {
  const Node relu = testing::make_node("Relu", {"x"}, {"y"});
  KernelInfo info{.node = relu,
                  .opset = 17,
                  .device_type = DeviceType::CUDA,
                  .input_types = {TensorType{DType::Float32, std::nullopt}}};
  std::unique_ptr<OpKernel> kernel = KernelRegistry::instance().create(info);
  ASSERT_NE(kernel, nullptr);
  auto context = backend_for(DeviceType::CPU).create_execution_context(Device::cpu(0), {});
  const Tensor x = Tensor::from_vector<float>({1}, {1});
  const Tensor* inputs[] = {&x};
  std::vector<Tensor> outputs(1);
  KernelContext ctx(relu, *context, inputs, outputs);
  EXPECT_EQ(testing::error_of([&] { kernel->compute(ctx); }),
            "[Relu] node 'Relu_under_test': the CUDA kernel 'Relu' is not in this build (dprun "
            "was built without the CUDA toolkit)");
}
#endif

TEST(CudaKernelDefs, SupplyingAComputeTwiceFails) {
  const KernelFactory none = [](const KernelInfo&) { return std::unique_ptr<OpKernel>(); };
  add_cuda_compute("dprun.test.Twice", none);
  EXPECT_EQ(testing::error_of([&] { add_cuda_compute("dprun.test.Twice", none); }),
            "the CUDA compute 'dprun.test.Twice' is supplied twice");
}

}  // namespace
}  // namespace dprun
