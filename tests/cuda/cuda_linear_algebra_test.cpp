// The CUDA kernels of MatMul, Gemm, Softmax, LogSoftmax, Transpose and the reshape family,
// each compared with the CPU kernel on the same random inputs: one-node models run on cuda:0
// and on cpu:0. The case table also checks, without a GPU, that every CUDA definition of
// these ops is exercised by some case and that every case finds a CUDA kernel.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "cuda_test_util.h"
#include "engine/kernel.h"
#include "op_test_util.h"

namespace dprun {
namespace {

/// The ops whose CUDA kernels this file covers.
const std::set<std::string> kCoveredOps = {"MatMul",    "Gemm",    "Softmax", "LogSoftmax",
                                           "Transpose", "Reshape", "Flatten", "Squeeze",
                                           "Unsqueeze", "Identity"};

/// One graph input: random values of `dtype`, or the given int64 `values` (shapes, axes).
struct InputSpec {
  Shape shape;
  DType dtype = DType::Float32;
  std::vector<int64_t> values;
};

struct Case {
  std::string name;  // the test's name suffix
  Node node;
  std::vector<InputSpec> inputs;
  int64_t opset = 17;
  /// Floats agree to 1e-5 relative: |cuda - cpu| <= 1e-5 * max(|cpu|, floor). A floor of 1
  /// keeps sums of products of O(1) values that cancel to near 0 from demanding more than
  /// float precision; 0 makes the check purely relative.
  double floor = 1.0;
  friend void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }
};

Node node_with(const std::string& op, std::vector<std::string> inputs,
               std::map<std::string, Attribute> attributes = {}) {
  Node n = testing::make_node(op, std::move(inputs), {"y"});
  n.attributes = std::move(attributes);
  return n;
}

InputSpec floats(Shape shape) {
  return {.shape = std::move(shape)};
}

InputSpec int64s(std::vector<int64_t> values) {
  const auto n = static_cast<int64_t>(values.size());
  return {.shape = {n}, .dtype = DType::Int64, .values = std::move(values)};
}

std::string dims_name(const Shape& shape) {
  std::string s;
  for (int64_t d : shape) {
    if (!s.empty()) s += 'x';
    s += std::to_string(d);
  }
  return s.empty() ? "scalar" : s;
}

void add_matmul_cases(std::vector<Case>& cases) {
  const std::vector<std::pair<Shape, Shape>> shapes = {
      {{2, 3}, {3, 4}},           // plain
      {{5, 2, 3}, {3, 4}},        // b without batch dims: one GEMM over a's batches
      {{4}, {4, 3}},              // 1-D a
      {{3, 4}, {4}},              // 1-D b
      {{3, 4}, {2, 4, 5}},        // a without batch dims: stride 0
      {{2, 3, 4}, {2, 4, 5}},     // equal batches: strided batched
      {{2, 1, 3, 4}, {5, 4, 2}},  // batches broadcast against each other: a GEMM per matrix
      {{2, 8, 16}, {16, 12}},
  };
  for (const auto& [a, b] : shapes)
    cases.push_back({.name = "MatMul_" + dims_name(a) + "_by_" + dims_name(b),
                     .node = node_with("MatMul", {"a", "b"}),
                     .inputs = {floats(a), floats(b)}});
}

void add_gemm_cases(std::vector<Case>& cases) {
  const int64_t m = 3, k = 5, n = 4;
  const std::vector<Shape> c_shapes = {{}, {n}, {m, 1}, {m, n}, {1, n}, {1}};
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb) {
      const Shape a = ta ? Shape{k, m} : Shape{m, k}, b = tb ? Shape{n, k} : Shape{k, n};
      const std::map<std::string, Attribute> attrs = {{"transA", Attribute::of_int(ta)},
                                                      {"transB", Attribute::of_int(tb)},
                                                      {"alpha", Attribute::of_float(0.75f)},
                                                      {"beta", Attribute::of_float(1.5f)}};
      const std::string prefix =
          "Gemm_transA" + std::to_string(ta) + "_transB" + std::to_string(tb);
      cases.push_back({.name = prefix + "_no_C",
                       .node = node_with("Gemm", {"a", "b"}, attrs),
                       .inputs = {floats(a), floats(b)}});
      for (const Shape& c : c_shapes)
        cases.push_back({.name = prefix + "_C_" + dims_name(c),
                         .node = node_with("Gemm", {"a", "b", "c"}, attrs),
                         .inputs = {floats(a), floats(b), floats(c)}});
    }
  // Defaults (alpha = beta = 1), and beta = 0, where C is not read.
  cases.push_back({.name = "Gemm_defaults",
                   .node = node_with("Gemm", {"a", "b", "c"}),
                   .inputs = {floats({m, k}), floats({k, n}), floats({n})}});
  cases.push_back({.name = "Gemm_beta0",
                   .node = node_with("Gemm", {"a", "b", "c"}, {{"beta", Attribute::of_float(0)}}),
                   .inputs = {floats({m, k}), floats({k, n}), floats({m, n})}});
}

void add_softmax_cases(std::vector<Case>& cases) {
  for (const std::string op : {"Softmax", "LogSoftmax"}) {
    auto add = [&](const std::string& name, Shape shape, int64_t opset,
                   std::optional<int64_t> axis) {
      std::map<std::string, Attribute> attrs;
      if (axis) attrs["axis"] = Attribute::of_int(*axis);
      cases.push_back({.name = op + "_" + name,
                       .node = node_with(op, {"x"}, attrs),
                       .inputs = {floats(std::move(shape))},
                       .opset = opset,
                       // Softmax values are positive and do not cancel; LogSoftmax's x - shift
                       // can, so it keeps the floor of 1.
                       .floor = op == "Softmax" ? 0.0 : 1.0});
    };
    add("2x3x70_axis_last", {2, 3, 70}, 13, -1);
    add("2x3x70_default_axis", {2, 3, 70}, 13, std::nullopt);
    add("2x3x70_axis1", {2, 3, 70}, 13, 1);  // strided: inner = 70
    add("2x3x70_axis0", {2, 3, 70}, 13, 0);
    add("2x3x70_opset11_axis1", {2, 3, 70}, 11, 1);  // coerced to [2, 210]
    add("2x3x70_opset11_default_axis", {2, 3, 70}, 11, std::nullopt);
    add("4x5000_wide_row", {4, 5000}, 13, -1);  // longer than a block
    add("scalar", {}, 13, std::nullopt);
  }
}

void add_transpose_cases(std::vector<Case>& cases) {
  const std::vector<std::pair<Shape, std::vector<int64_t>>> perms = {
      {{3, 5}, {1, 0}},
      {{3, 5}, {}},  // default: reversed
      {{2, 3, 4}, {0, 2, 1}},
      {{2, 3, 4}, {2, 0, 1}},
      {{2, 3, 4}, {0, 1, 2}},  // the identity: a copy
      {{2, 3, 4, 5}, {0, 2, 1, 3}},
      {{2, 3, 4, 5}, {3, 1, 0, 2}},
      {{2, 1, 4, 5}, {1, 3, 0, 2}},  // a size-1 dim
      {{2, 3, 4, 5}, {-1, -2, 0, 1}},
  };
  for (const auto& [shape, perm] : perms) {
    std::map<std::string, Attribute> attrs;
    if (!perm.empty()) attrs["perm"] = Attribute::of_ints(perm);
    std::string perm_name = perm.empty() ? "default" : "";
    for (int64_t p : perm) {
      if (p < 0) perm_name += 'm';
      perm_name += std::to_string(std::abs(p));
    }
    cases.push_back({.name = "Transpose_" + dims_name(shape) + "_perm_" + perm_name,
                     .node = node_with("Transpose", {"x"}, attrs),
                     .inputs = {floats(shape)}});
  }
  // Other element sizes move the same way.
  for (DType dt : {DType::UInt8, DType::Int16, DType::Int64, DType::Float64})
    cases.push_back(
        {.name = "Transpose_" + std::string(dtype_name(dt)),
         .node = node_with("Transpose", {"x"}, {{"perm", Attribute::of_ints({2, 0, 1})}}),
         .inputs = {{.shape = {3, 4, 5}, .dtype = dt}}});
}

void add_reshape_cases(std::vector<Case>& cases) {
  const Shape x = {2, 3, 4};
  cases.push_back({.name = "Reshape_input",
                   .node = node_with("Reshape", {"x", "shape"}),
                   .inputs = {floats(x), int64s({4, 0, -1})}});
  cases.push_back({.name = "Reshape_opset4_attribute",
                   .node = node_with("Reshape", {"x"}, {{"shape", Attribute::of_ints({6, 4})}}),
                   .inputs = {floats(x)},
                   .opset = 4});
  cases.push_back({.name = "Flatten",
                   .node = node_with("Flatten", {"x"}, {{"axis", Attribute::of_int(2)}}),
                   .inputs = {floats(x)}});
  cases.push_back({.name = "Squeeze_input",
                   .node = node_with("Squeeze", {"x", "axes"}),
                   .inputs = {floats({2, 1, 3, 1}), int64s({1, -1})}});
  cases.push_back({.name = "Squeeze_opset11_attribute",
                   .node = node_with("Squeeze", {"x"}, {{"axes", Attribute::of_ints({1})}}),
                   .inputs = {floats({2, 1, 3, 1})},
                   .opset = 11});
  cases.push_back({.name = "Unsqueeze_input",
                   .node = node_with("Unsqueeze", {"x", "axes"}),
                   .inputs = {floats(x), int64s({0, 4})}});
  cases.push_back({.name = "Unsqueeze_opset11_attribute",
                   .node = node_with("Unsqueeze", {"x"}, {{"axes", Attribute::of_ints({1})}}),
                   .inputs = {floats(x)},
                   .opset = 11});
  cases.push_back(
      {.name = "Identity", .node = node_with("Identity", {"x"}), .inputs = {floats(x)}});
}

const std::vector<Case>& all_cases() {
  static const std::vector<Case> cases = [] {
    std::vector<Case> c;
    add_matmul_cases(c);
    add_gemm_cases(c);
    add_softmax_cases(c);
    add_transpose_cases(c);
    add_reshape_cases(c);
    return c;
  }();
  return cases;
}

/// The case's inputs on the host; random values are fixed by `seed`.
std::vector<Tensor> make_inputs(const Case& c, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<Tensor> inputs;
  for (const InputSpec& spec : c.inputs) {
    if (!spec.values.empty()) {
      inputs.push_back(Tensor::from_vector<int64_t>(spec.shape, spec.values));
      continue;
    }
    Tensor t = Tensor::empty(spec.shape, spec.dtype);
    visit_dtype(spec.dtype, [&](auto zero) {
      using T = decltype(zero);
      if constexpr (std::is_floating_point_v<T>) {
        std::uniform_real_distribution<double> dist(-2.0, 2.0);
        for (int64_t i = 0; i < t.numel(); ++i) t.data<T>()[i] = static_cast<T>(dist(rng));
      } else if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
        std::uniform_int_distribution<int64_t> dist(0, 100);
        for (int64_t i = 0; i < t.numel(); ++i) t.data<T>()[i] = static_cast<T>(dist(rng));
      } else {
        FAIL() << "no random values for " << dtype_name(spec.dtype);
      }
    });
    inputs.push_back(std::move(t));
  }
  return inputs;
}

/// The KernelInfo a CUDA plan would build for the case's node.
KernelInfo cuda_kernel_info(const Case& c) {
  KernelInfo info{c.node, c.opset, DeviceType::CUDA, {}, {}};
  for (const InputSpec& spec : c.inputs) {
    SymbolicShape shape;
    for (int64_t d : spec.shape) shape.push_back(Dim::known(d));
    info.input_types.push_back(TensorType{spec.dtype, shape});
  }
  return info;
}

TEST(CudaLinearAlgebraCases, EveryCudaDefinitionOfTheseOpsHasACase) {
  std::set<std::string> registered;
  for (const KernelDef& def : KernelRegistry::instance().definitions()) {
    if (def.device != DeviceType::CUDA || !def.domain.empty() || !kCoveredOps.count(def.op_type))
      continue;
    registered.insert(def.op_type);
    const bool covered = std::any_of(all_cases().begin(), all_cases().end(), [&](const Case& c) {
      const DType dtype = c.inputs[static_cast<size_t>(def.dtype_input)].dtype;
      return c.node.op_type == def.op_type && c.opset >= def.since && c.opset <= def.until &&
             (def.dtypes.empty() ||
              std::find(def.dtypes.begin(), def.dtypes.end(), dtype) != def.dtypes.end());
    });
    EXPECT_TRUE(covered) << "no case runs the CUDA " << def.op_type << " kernel for opsets "
                         << def.since << ".." << def.until;
  }
  for (const std::string& op : kCoveredOps)
    EXPECT_TRUE(registered.count(op)) << op << " has no CUDA kernel";
}

TEST(CudaLinearAlgebraCases, EveryCaseFindsACudaKernel) {
  for (const Case& c : all_cases()) {
    SCOPED_TRACE(c.name);
    EXPECT_TRUE(kCoveredOps.count(c.node.op_type));
    std::string why;
    EXPECT_NE(KernelRegistry::instance().create(cuda_kernel_info(c), &why), nullptr) << why;
  }
}

class CudaMatchesCpu : public ::testing::TestWithParam<Case> {};

TEST_P(CudaMatchesCpu, OnTheSameInputs) {
  DPRUN_REQUIRE_CUDA_GPU();
  const Case& c = GetParam();
  const std::vector<Tensor> inputs = make_inputs(c, 1234);
  const std::vector<Tensor> cpu = testing::run_node(c.node, inputs, c.opset);
  const std::vector<Tensor> cuda = testing::run_node(c.node, inputs, c.opset, "", Device::cuda(0));
  ASSERT_EQ(cuda.size(), cpu.size());
  for (size_t o = 0; o < cpu.size(); ++o) {
    ASSERT_EQ(cuda[o].device(), Device::cuda(0));
    const Tensor got = cuda[o].to(Device::cpu());
    const Tensor& want = cpu[o];
    ASSERT_EQ(got.dtype(), want.dtype());
    ASSERT_EQ(shape_to_string(got.shape()), shape_to_string(want.shape()));
    const bool exact = !is_floating(want.dtype());
    int mismatches = 0;
    for (int64_t i = 0; i < want.numel() && mismatches < 10; ++i) {
      const double g = got.item_as_double(i), w = want.item_as_double(i);
      const double tol = exact ? 0.0 : 1e-5 * std::max(std::abs(w), c.floor);
      if (!(std::abs(g - w) <= tol)) {
        ++mismatches;
        ADD_FAILURE() << "element " << i << ": cuda " << g << ", cpu " << w;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ops, CudaMatchesCpu, ::testing::ValuesIn(all_cases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return info.param.name;
                         });

}  // namespace
}  // namespace dprun
