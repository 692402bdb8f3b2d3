// The CUDA kernels of the op fusion's products (engine/rewrites/op_fusion.h): MatMulBias on
// cuBLASLt's bias epilogue and FusedGemm, each with every fused activation (and in 16 bits),
// compared with the CPU kernels on the same random inputs; and the CUDA backend's rewrite,
// which fuses a MatMul, its bias Add and a GELU in the erf form that exporters write. And the
// CPU's FusedMatMul (a MatMul of operands transposed in their last two dims), which has no CUDA
// kernel: on sim:0 its cases check the host fallback's copies.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "engine/backend.h"
#include "engine/kernel.h"
#include "engine/model.h"
#include "engine/plan.h"
#include "engine/rewrites/rewrite_domain.h"
#include "graph_test_util.h"
#include "op_cases/op_cases.h"
#include "op_test_util.h"
#include "ops/math/fused_activation_kind.h"

namespace dprun {
namespace {

const std::set<std::string> kCoveredOps = {"MatMulBias", "FusedGemm"};
const std::set<std::string> kHostOnlyOps = {"FusedMatMul"};

using testing::dims_name;
using testing::floats;
using testing::InputSpec;
using testing::node_with;
using testing::OpCase;

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

void add_matmul_bias_cases(std::vector<OpCase>& cases) {
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

void add_fused_gemm_cases(std::vector<OpCase>& cases) {
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
void add_16bit_cases(std::vector<OpCase>& cases) {
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

/// FusedMatMul with A, B or both stored transposed, batched and broadcast, and a weight matrix.
void add_fused_matmul_cases(std::vector<OpCase>& cases) {
  struct Case {
    const char* what;
    Shape a, b;  // as stored
    bool trans_a, trans_b;
  };
  for (const Case& c : {Case{"transA", {2, 3, 5, 4}, {2, 3, 5, 6}, true, false},
                        Case{"transB", {2, 3, 4, 5}, {2, 3, 6, 5}, false, true},
                        Case{"both", {2, 3, 5, 4}, {2, 3, 6, 5}, true, true},
                        Case{"both_broadcast", {1, 3, 5, 4}, {2, 1, 6, 5}, true, true},
                        Case{"weight_transB", {4, 7, 5}, {6, 5}, false, true}}) {
    std::map<std::string, Attribute> attributes;
    if (c.trans_a) attributes["transA"] = Attribute::of_int(1);
    if (c.trans_b) attributes["transB"] = Attribute::of_int(1);
    cases.push_back({.name = std::string("FusedMatMul_") + c.what + "_" + dims_name(c.a) + "_by_" +
                             dims_name(c.b),
                     .node = fused("FusedMatMul", {"a", "b"}, "", attributes),
                     .inputs = {floats(c.a), floats(c.b)},
                     .opset = 1});
  }
}

DPRUN_OP_CASES_WITH_HOST_ONLY(FusedProduct, kCoveredOps, kHostOnlyOps, add_matmul_bias_cases,
                              add_fused_gemm_cases, add_16bit_cases, add_fused_matmul_cases);

}  // namespace
}  // namespace dprun
