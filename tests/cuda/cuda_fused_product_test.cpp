// The CUDA kernels of the op fusion's products (engine/rewrites/op_fusion.h): MatMulBias on
// cuBLASLt's bias epilogue and FusedGemm, each with every fused activation (and in 16 bits),
// compared with the CPU kernels on the same random inputs; and the CUDA backend's rewrite,
// which fuses a MatMul, its bias Add and a GELU in the erf form that exporters write.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "cuda_op_cases.h"
#include "cuda_test_util.h"
#include "engine/backend.h"
#include "engine/kernel.h"
#include "engine/model.h"
#include "engine/plan.h"
#include "engine/rewrites/rewrite_domain.h"
#include "graph_test_util.h"
#include "op_test_util.h"
#include "ops/math/fused_activation_kind.h"

namespace dprun {
namespace {

const std::set<std::string> kCoveredOps = {"MatMulBias", "FusedGemm"};

using testing::CudaCase;
using testing::dims_name;
using testing::floats;
using testing::InputSpec;
using testing::node_with;

/// Every value of the "activation" attribute ("" is none), from the shared list.
std::vector<std::string> activations() {
  std::vector<std::string> names;
  for (const auto& [name, kind] : fused_activation_kinds()) names.push_back(name);
  return names;
}

Node fused(const std::string& op, std::vector<std::string> inputs, const std::string& activation,
           std::map<std::string, Attribute> attributes = {}) {
  if (!activation.empty()) attributes["activation"] = Attribute::of_string(activation);
  if (activation == "Clip") {  // bounds inside the products' range, so both clip
    attributes["activation_min"] = Attribute::of_float(-0.5f);
    attributes["activation_max"] = Attribute::of_float(0.75f);
  }
  Node n = node_with(op, std::move(inputs), std::move(attributes));
  n.domain = kRewriteDomain;
  return n;
}

std::string suffix(const std::string& activation) {
  return activation.empty() ? "" : "_" + activation;
}

void add_matmul_bias_cases(std::vector<CudaCase>& cases) {
  struct Dims {
    Shape a;
    int64_t n;
  };
  const std::vector<Dims> dims = {
      {{2, 3}, 4},     // plain
      {{5, 2, 3}, 4},  // A's batch dims are rows of one product
      {{4}, 3},        // 1-D A: one row
      {{64, 96}, 80},  // several tiles
      {{7, 33}, 5},    // odd sizes: operands aligned to 4 bytes only
      {{2, 0}, 4},     // an empty sum: every row is the bias
  };
  for (const Dims& d : dims)
    for (const std::string& act : activations()) {
      const int64_t k = d.a.back();
      // B and the bias are initializers, as the fusion requires of them.
      InputSpec b = floats({k, d.n}), bias = floats({d.n});
      b.constant = bias.constant = true;
      cases.push_back(
          {.name = "MatMulBias_" + dims_name(d.a) + "_by_" + dims_name({k, d.n}) + suffix(act),
           .node = fused("MatMulBias", {"a", "b", "bias"}, act),
           .inputs = {floats(d.a), b, bias},
           .opset = 1});
    }
}

void add_fused_gemm_cases(std::vector<CudaCase>& cases) {
  const int64_t m = 6, k = 5, n = 7;
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb)
      for (const std::string& act : activations()) {
        const Shape a = ta ? Shape{k, m} : Shape{m, k}, b = tb ? Shape{n, k} : Shape{k, n};
        const std::map<std::string, Attribute> attrs = {{"transA", Attribute::of_int(ta)},
                                                        {"transB", Attribute::of_int(tb)},
                                                        {"alpha", Attribute::of_float(0.75f)}};
        const std::string prefix =
            "FusedGemm_transA" + std::to_string(ta) + "_transB" + std::to_string(tb) + suffix(act);
        // A row of bias added whole: cuBLASLt's epilogue.
        cases.push_back({.name = prefix + "_bias_row",
                         .node = fused("FusedGemm", {"a", "b", "c"}, act, attrs),
                         .inputs = {floats(a), floats(b), floats({n})},
                         .opset = 1});
        // A full C scaled by beta: cuBLAS, then the activation pass.
        std::map<std::string, Attribute> scaled = attrs;
        scaled["beta"] = Attribute::of_float(1.5f);
        cases.push_back({.name = prefix + "_C_scaled",
                         .node = fused("FusedGemm", {"a", "b", "c"}, act, scaled),
                         .inputs = {floats(a), floats(b), floats({m, n})},
                         .opset = 1});
      }
  cases.push_back({.name = "FusedGemm_no_C_Relu",
                   .node = fused("FusedGemm", {"a", "b"}, "Relu"),
                   .inputs = {floats({m, k}), floats({k, n})},
                   .opset = 1});
  cases.push_back({.name = "FusedGemm_bias_1xN_Gelu",
                   .node = fused("FusedGemm", {"a", "b", "c"}, "Gelu"),
                   .inputs = {floats({m, k}), floats({k, n}), floats({1, n})},
                   .opset = 1});
}

/// `spec` with 16-bit elements of `dtype`.
InputSpec of_type(InputSpec spec, DType dtype) {
  spec.dtype = dtype;
  return spec;
}

// In float16 and bfloat16: the product plus bias, and a Relu, rounded once on both devices (the
// cuBLASLt epilogue and oneDNN's); other activations are applied after the rounding on a GPU, a
// second rounding the CPU does not make, so they are not compared here.
void add_16bit_cases(std::vector<CudaCase>& cases) {
  for (DType dtype : {DType::Float16, DType::BFloat16})
    for (const std::string act : {"", "Relu"}) {
      const std::string type(dtype_name(dtype));
      InputSpec b = of_type(floats({48, 40}), dtype), bias = of_type(floats({40}), dtype);
      b.constant = bias.constant = true;
      cases.push_back({.name = "MatMulBias_" + type + "_3x16x48_by_48x40" + suffix(act),
                       .node = fused("MatMulBias", {"a", "b", "bias"}, act),
                       .inputs = {of_type(floats({3, 16, 48}), dtype), b, bias},
                       .opset = 1});
      cases.push_back(
          {.name = "FusedGemm_" + type + "_transB1_bias_row" + suffix(act),
           .node = fused("FusedGemm", {"a", "b", "c"}, act, {{"transB", Attribute::of_int(1)}}),
           .inputs = {of_type(floats({24, 32}), dtype), of_type(floats({40, 32}), dtype),
                      of_type(floats({40}), dtype)},
           .opset = 1});
    }
}

const std::vector<CudaCase>& all_cases() {
  static const std::vector<CudaCase> cases = [] {
    std::vector<CudaCase> c;
    add_matmul_bias_cases(c);
    add_fused_gemm_cases(c);
    add_16bit_cases(c);
    return c;
  }();
  return cases;
}

DPRUN_CUDA_CASE_TESTS(CudaFusedProduct, all_cases(), kCoveredOps);

TEST(CudaFusedProduct, WithoutCublasLtTheCublasPathMatchesTheCpu) {
  // Where cuBLASLt offers no algorithm the kernels fall back to cuBLAS with the bias written
  // first; DPRUN_NO_CUBLASLT=1 takes that path for every case.
  DPRUN_REQUIRE_CUDA_GPU();
  ::setenv("DPRUN_NO_CUBLASLT", "1", 1);
  for (const CudaCase& c : all_cases()) {
    SCOPED_TRACE(c.name);
    testing::expect_cuda_matches_cpu(c);
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
  const Node gemm = fused("FusedGemm", {"a", "b", "c"}, "Relu");
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
  const auto rewritten = backend_for(DeviceType::CUDA).rewrite_graph(graph, GraphRewriteOptions{});
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
  EXPECT_EQ(backend_for(DeviceType::CUDA).rewrite_graph(graph, {.fusion = false}), graph);

  DPRUN_REQUIRE_CUDA_GPU();
  const Tensor x = testing::random_floats({5, 8}, 5);
  const Tensor want = Model(graph, Device::cpu(), {.fuse_ops = false}).run({x})[0];
  const Tensor got = Model(graph, Device::cuda(0)).run({x})[0];
  testing::expect_device_output_matches(got, want, 1.0);
}

}  // namespace
}  // namespace dprun
