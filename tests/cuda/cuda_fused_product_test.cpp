// The CUDA kernels of the op fusion's products (engine/rewrites/op_fusion.h) beyond their case
// table (ops/linalg/fused_product_cases.cpp): the cuBLAS path taken without cuBLASLt, a
// bias too little aligned for cuBLASLt's epilogue, and the CUDA backend's rewrite, which fuses a
// MatMul, its bias Add and a GELU in the erf form that exporters write.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "cuda_test_util.h"
#include "engine/backend.h"
#include "engine/kernel.h"
#include "engine/model.h"
#include "engine/plan.h"
#include "engine/rewrites/device_rewrites.h"
#include "engine/rewrites/rewrite_domain.h"
#include "graph_test_util.h"
#include "op_cases/op_cases.h"
#include "op_test_util.h"

namespace dprun {
namespace {

using testing::floats;
using testing::OpCase;

TEST(CudaFusedProduct, WithoutCublasLtTheCublasPathMatchesTheCpu) {
  // Where cuBLASLt offers no algorithm the kernels fall back to cuBLAS with the bias written
  // first; DPRUN_NO_CUBLASLT=1 takes that path for every case.
  DPRUN_REQUIRE_CUDA_GPU();
  ::setenv("DPRUN_NO_CUBLASLT", "1", 1);
  for (const OpCase& c : testing::op_cases_of("FusedProduct")) {
    SCOPED_TRACE(c.name);
    testing::expect_device_matches_cpu(c, Device::cuda(0));
  }
  ::unsetenv("DPRUN_NO_CUBLASLT");
}

// The output of `node`'s kernel for `device`, run there on `inputs`.
Tensor run_kernel_on(Device device, const Node& node, const std::vector<Tensor>& inputs) {
  KernelInfo info{node, 1, device.type, {}, {}};
  std::vector<const Tensor*> pointers;
  for (const Tensor& t : inputs) {
    SymbolicShape shape;
    for (int64_t d : t.shape()) shape.push_back(Dim::known(d));
    info.input_types.push_back(TensorType{t.dtype(), shape});
    pointers.push_back(&t);
  }
  std::unique_ptr<OpKernel> kernel = KernelRegistry::instance().create(info);
  if (!kernel) {
    ADD_FAILURE() << "no " << node.op_type << " kernel for " << device.to_string();
    return {};
  }
  auto context = backend_for(device).create_execution_context(device, {});
  std::vector<Tensor> outputs(1);
  KernelContext ctx(node, *context, pointers, outputs);
  kernel->compute(ctx);
  context->synchronize();
  return outputs[0];
}

TEST(CudaFusedProduct, ABiasLessThan16ByteAlignedTakesTheCublasPath) {
  // A bias row that is a view 4 bytes into a larger tensor: cuBLASLt's epilogue is not asked
  // to read it.
  DPRUN_REQUIRE_CUDA_GPU();
  const int64_t m = 6, k = 5, n = 7;
  Node gemm = testing::node_with("FusedGemm", {"a", "b", "c"},
                                 {{"activation", Attribute::of_string("Relu")}});
  gemm.domain = kRewriteDomain;
  const Tensor a = testing::random_floats({m, k}, 11), b = testing::random_floats({k, n}, 12);
  const Tensor c_all = testing::random_floats({n + 1}, 13);
  const Tensor c_view = c_all.to(Device::cuda(0)).narrow(0, 1, n);
  ASSERT_EQ(reinterpret_cast<uintptr_t>(c_view.raw_data()) % 16, 4u);
  const Tensor want = run_kernel_on(Device::cpu(), gemm, {a, b, c_all.narrow(0, 1, n)});
  const Tensor got =
      run_kernel_on(Device::cuda(0), gemm, {a.to(Device::cuda(0)), b.to(Device::cuda(0)), c_view});
  testing::expect_device_output_matches(got, want, 1.0);
}

/// y = GELU(x W + b) with GELU as exporters write it before Gelu-20:
/// (h * 0.5) * (1 + erf(h / sqrt 2)).
std::shared_ptr<Graph> linear_gelu_graph(int64_t k, int64_t n) {
  using testing::make_node;
  auto g = testing::make_graph(
      {make_node("MatMul", {"x", "w"}, {"p"}), make_node("Add", {"p", "b"}, {"h"}),
       make_node("Div", {"h", "sqrt2"}, {"s"}), make_node("Erf", {"s"}, {"e"}),
       make_node("Add", {"e", "one"}, {"e1"}), make_node("Mul", {"h", "half"}, {"hh"}),
       make_node("Mul", {"hh", "e1"}, {"y"})},
      {{"x", DType::Float32}}, {"y"});
  g->initializers["w"] = testing::random_floats({k, n}, 3);
  g->initializers["b"] = testing::random_floats({n}, 4);
  g->initializers["sqrt2"] = Tensor::scalar(static_cast<float>(std::sqrt(2.0)));
  g->initializers["one"] = Tensor::scalar(1.f);
  g->initializers["half"] = Tensor::scalar(0.5f);
  return g;
}

TEST(CudaFusedProduct, TheCudaRewriteFusesALinearLayerAndItsGelu) {
  // Rewriting and placing need no GPU.
  const auto graph = linear_gelu_graph(8, 6);
  const auto rewritten =
      rewrite_for_device(backend_for(DeviceType::CUDA), graph, GraphRewriteOptions{});
  ASSERT_EQ(rewritten->nodes.size(), 1u);
  const Node& node = rewritten->nodes[0];
  EXPECT_EQ(node.domain, kRewriteDomain);
  EXPECT_EQ(node.op_type, "MatMulBias");
  EXPECT_EQ(node.attr_string("activation", ""), "Gelu");
  EXPECT_EQ(node.outputs, std::vector<std::string>{"y"});
  const std::vector<NodePlacement> placed = place_nodes(*rewritten, DeviceType::CUDA);
  ASSERT_EQ(placed.size(), 1u);
  EXPECT_EQ(placed[0].device, DeviceType::CUDA) << placed[0].why_not;
  // Without fusion the graph is compiled as it is.
  EXPECT_EQ(rewrite_for_device(backend_for(DeviceType::CUDA), graph, {.fusion = false}), graph);

  DPRUN_REQUIRE_CUDA_GPU();
  const Tensor x = testing::random_floats({5, 8}, 5);
  const Tensor want = Model(graph, Device::cpu(), {.fuse_ops = false}).run({x})[0];
  const Tensor got = Model(graph, Device::cuda(0)).run({x})[0];
  testing::expect_device_output_matches(got, want, 1.0);
}

}  // namespace
}  // namespace dprun
