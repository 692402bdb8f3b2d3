// The CUDA elementwise kernels (ops/cuda, impl "elementwise") against the CPU kernels. The
// registry drives the tests: every CUDA elementwise definition, for every dtype it lists, runs
// as a one-node model on cuda:0 and on cpu:0 with the same random inputs, broadcast shapes and
// attribute variants, and the outputs must agree (1e-5 relative, 1e-6 absolute near 0 for floats,
// bit for bit otherwise). Every such definition needs an entry in cases(), which says what
// inputs are valid for its op; the registry test, which needs no GPU, fails without one. The
// host-side broadcast planning and index mapping are checked without a GPU as well.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "cuda_test_util.h"
#include "engine/kernel.h"
#include "kernel_test_util.h"
#include "op_cases/op_cases.h"
#include "op_test_util.h"
#include "ops/cuda/elementwise_layout.h"

namespace dprun {
namespace {

using Attributes = std::map<std::string, Attribute>;

/// The dtype of one input of a case: the dtype under test, or bool.
enum class Input { Tested, Bool };

/// How to test one op.
struct OpCase {
  double lo = -3.0, hi = 3.0;  // range of Tested inputs; integers: the integers in it
  std::vector<Input> inputs = {Input::Tested};
  std::vector<Attributes> attribute_sets = {{}};  // each is tested
  bool halves = false;   // floats rounded to multiples of 0.5: ties for comparisons and Round
  bool special = false;  // NaN and +-inf mixed in
  /// The dtypes of Tested inputs when the definition lists none (Where, whose registered
  /// dtypes would constrain its bool condition).
  std::vector<DType> untyped_dtypes = {};
};

Attributes attrs(std::initializer_list<std::pair<const std::string, Attribute>> list) {
  return Attributes(list);
}

OpCase range(double lo, double hi) {
  OpCase c;
  c.lo = lo;
  c.hi = hi;
  return c;
}

OpCase with_attributes(OpCase c, std::vector<Attributes> sets) {
  c.attribute_sets = std::move(sets);
  return c;
}

OpCase binary(double lo, double hi) {
  OpCase c = range(lo, hi);
  c.inputs = {Input::Tested, Input::Tested};
  return c;
}

OpCase comparison() {
  OpCase c = binary(-2.0, 2.0);
  c.halves = true;
  return c;
}

/// Valid inputs per op. A CUDA elementwise op without an entry fails the tests.
const std::map<std::string, OpCase>& cases() {
  static const std::map<std::string, OpCase> table = [] {
    std::map<std::string, OpCase> t;
    // ops/elementwise/unary_math.cu
    t["Abs"] = range(-10, 10);
    t["Neg"] = range(-10, 10);
    t["Sign"] = range(-3, 3);
    t["Sign"].halves = true;  // zeros included
    t["Reciprocal"] = range(0.2, 5);
    t["Sqrt"] = range(0.01, 10);
    t["Exp"] = range(-10, 10);
    t["Log"] = range(0.01, 10);
    t["Erf"] = range(-4, 4);
    t["Floor"] = range(-5, 5);
    t["Ceil"] = range(-5, 5);
    t["Round"] = range(-5, 5);
    t["Round"].halves = true;  // ties round to even
    t["Sin"] = range(-6, 6);
    t["Cos"] = range(-6, 6);
    t["Tan"] = range(-1.4, 1.4);
    t["Asin"] = range(-1, 1);
    t["Acos"] = range(-1, 1);
    t["Atan"] = range(-10, 10);
    t["Sinh"] = range(-5, 5);
    t["Cosh"] = range(-5, 5);
    t["Asinh"] = range(-10, 10);
    t["Acosh"] = range(1, 10);
    t["Atanh"] = range(-0.95, 0.95);
    t["IsNaN"] = range(-3, 3);
    t["IsNaN"].special = true;
    t["IsInf"] =
        with_attributes(range(-3, 3), {{},
                                       attrs({{"detect_positive", Attribute::of_int(0)}}),
                                       attrs({{"detect_negative", Attribute::of_int(0)}})});
    t["IsInf"].special = true;
    t["Not"] = OpCase{};
    t["BitwiseNot"] = range(-100, 100);
    // ops/elementwise/activations.cu
    t["Relu"] = range(-3, 3);
    t["LeakyRelu"] =
        with_attributes(range(-3, 3), {{}, attrs({{"alpha", Attribute::of_float(0.3f)}})});
    t["Elu"] = with_attributes(range(-3, 3), {{}, attrs({{"alpha", Attribute::of_float(0.5f)}})});
    t["Selu"] = with_attributes(
        range(-3, 3),
        {{}, attrs({{"alpha", Attribute::of_float(2.0f)}, {"gamma", Attribute::of_float(1.5f)}})});
    t["Celu"] = with_attributes(range(-3, 3), {{}, attrs({{"alpha", Attribute::of_float(2.0f)}})});
    t["Sigmoid"] = range(-10, 10);
    t["Tanh"] = range(-5, 5);
    t["HardSigmoid"] = with_attributes(
        range(-5, 5),
        {{}, attrs({{"alpha", Attribute::of_float(0.3f)}, {"beta", Attribute::of_float(0.4f)}})});
    t["HardSwish"] = range(-5, 5);
    t["Softplus"] = range(-10, 10);
    t["Softsign"] = range(-5, 5);
    t["ThresholdedRelu"] =
        with_attributes(range(-3, 3), {{}, attrs({{"alpha", Attribute::of_float(0.5f)}})});
    t["Mish"] = range(-5, 5);
    t["Gelu"] =
        with_attributes(range(-5, 5), {{},
                                       attrs({{"approximate", Attribute::of_string("none")}}),
                                       attrs({{"approximate", Attribute::of_string("tanh")}})});
    t["Shrink"] = with_attributes(
        range(-5, 5),
        {{}, attrs({{"lambd", Attribute::of_float(1.5f)}, {"bias", Attribute::of_float(0.5f)}})});
    // ops/elementwise/binary_arith.cu
    t["Add"] = binary(-5, 5);
    t["Sub"] = binary(-5, 5);
    t["Mul"] = binary(-5, 5);
    t["Div"] = binary(0.5, 5);
    t["Pow"] = binary(0.5, 2);
    // ops/elementwise/variadic.cu: three inputs broadcast together
    for (const char* op : {"Sum", "Mean", "Min", "Max"}) {
      t[op] = binary(-5, 5);
      t[op].inputs.push_back(Input::Tested);
    }
    t["Min"].special = t["Max"].special = true;  // NaN propagates
    // ops/elementwise/compare_logic.cu
    for (const char* op :
         {"Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual", "And", "Or", "Xor"})
      t[op] = comparison();
    // ops/elementwise/where.cu
    t["Where"] = range(-5, 5);
    t["Where"].inputs = {Input::Bool, Input::Tested, Input::Tested};
    t["Where"].untyped_dtypes = {DType::Float32, DType::Float64, DType::Int16,
                                 DType::Int64,   DType::UInt8,   DType::Bool};
    return t;
  }();
  return table;
}

std::vector<const KernelDef*> cuda_elementwise_definitions() {
  std::vector<const KernelDef*> defs;
  for (const KernelDef& def : KernelRegistry::instance().definitions())
    if (def.device == DeviceType::CUDA && def.impl == cuda_ew::kImpl) defs.push_back(&def);
  return defs;
}

/// Random values of `dtype` in [lo, hi] (integers: the integers in it that the type holds).
Tensor random_tensor(const Shape& shape, DType dtype, const OpCase& c, std::mt19937& rng) {
  Tensor t = Tensor::empty(shape, dtype);
  visit_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    T* p = t.data<T>();
    for (int64_t i = 0; i < t.numel(); ++i) {
      if constexpr (std::is_same_v<T, bool>) {
        p[i] = std::bernoulli_distribution(0.5)(rng);
      } else if constexpr (std::is_integral_v<T>) {
        const double lo = std::max(std::ceil(c.lo), double(std::numeric_limits<T>::lowest()));
        const double hi = std::min(std::floor(c.hi), double(std::numeric_limits<T>::max()));
        p[i] = static_cast<T>(std::uniform_int_distribution<int64_t>(
            static_cast<int64_t>(lo), static_cast<int64_t>(hi))(rng));
      } else if constexpr (std::is_floating_point_v<T> || std::is_same_v<T, Float16> ||
                           std::is_same_v<T, BFloat16>) {
        double v = std::uniform_real_distribution<double>(c.lo, c.hi)(rng);
        if (c.halves) v = std::round(v * 2.0) / 2.0;
        if (c.special && i % 4 == 0) {
          const float specials[] = {std::numeric_limits<float>::quiet_NaN(),
                                    std::numeric_limits<float>::infinity(),
                                    -std::numeric_limits<float>::infinity()};
          v = specials[(i / 4) % 3];
        }
        if constexpr (std::is_floating_point_v<T>)
          p[i] = static_cast<T>(v);
        else
          p[i] = T(static_cast<float>(v));  // 16 bits: rounded to nearest even
      } else {
        ADD_FAILURE() << "no random values for " << dtype_name(dtype);
      }
    }
  });
  return t;
}

std::string shapes_text(const std::vector<Tensor>& inputs) {
  std::string s;
  for (const Tensor& t : inputs) {
    if (!s.empty()) s += ' ';
    s += shape_to_string(t.shape());
  }
  return s;
}

/// Floats agree within 1e-5 * max(|cpu|, kFloor).
constexpr double kFloor = 0.1;

/// Runs `node` on cuda:0 and cpu:0 with `inputs` and compares every output.
void expect_cuda_matches_cpu(const Node& node, const std::vector<Tensor>& inputs, int64_t opset) {
  const std::vector<Tensor> want = testing::run_node(node, inputs, opset, node.domain);
  const std::vector<Tensor> got =
      testing::run_node(node, inputs, opset, node.domain, Device::cuda(0));
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i].device(), Device::cuda(0));
    testing::expect_device_output_matches(got[i], want[i], kFloor);
  }
}

/// Input shapes per input count: equal shapes, broadcasts of either side, scalars, and a
/// size that takes more than one block.
const std::vector<std::vector<Shape>>& shape_sets(size_t inputs) {
  static const std::vector<std::vector<Shape>> unary = {{{2, 3, 4}}, {{257, 129}}, {{}}};
  static const std::vector<std::vector<Shape>> binary = {
      {{2, 3, 4}, {2, 3, 4}}, {{2, 3, 4}, {3, 1}},    {{2, 3, 4}, {1}},
      {{}, {2, 3, 4}},        {{2, 3, 4}, {2, 1, 4}}, {{3, 1}, {2, 1, 4}},
      {{1, 3, 1}, {4}},       {{257, 129}, {129}},    {{257, 129}, {257, 129}}};
  static const std::vector<std::vector<Shape>> ternary = {{{2, 3, 4}, {2, 3, 4}, {2, 3, 4}},
                                                          {{2, 3, 4}, {3, 1}, {1}},
                                                          {{3, 1}, {2, 1, 4}, {}},
                                                          {{1}, {2, 3, 4}, {4}}};
  static const std::vector<std::vector<Shape>> none;
  switch (inputs) {
    case 1:
      return unary;
    case 2:
      return binary;
    case 3:
      return ternary;
    default:
      return none;
  }
}

/// The opset a definition is tested at: a recent one within its range.
int64_t test_opset(const KernelDef& def) {
  return std::min(std::max<int64_t>(def.since, 17), static_cast<int64_t>(def.until));
}

Node node_for(const KernelDef& def, size_t inputs, const Attributes& attributes) {
  std::vector<std::string> names;
  for (size_t i = 0; i < inputs; ++i) {
    names.emplace_back("x");  // appended: GCC 12 misreports "x" + std::to_string(i) (-Wrestrict)
    names.back() += std::to_string(i);
  }
  Node node = testing::make_node(def.op_type, names, {"y"});
  node.domain = def.domain;
  node.attributes = attributes;
  return node;
}

std::vector<Tensor> random_inputs(const OpCase& c, const std::vector<Shape>& shapes, DType dtype,
                                  std::mt19937& rng) {
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < c.inputs.size(); ++i)
    inputs.push_back(
        random_tensor(shapes[i], c.inputs[i] == Input::Bool ? DType::Bool : dtype, c, rng));
  return inputs;
}

TEST(CudaElementwise, EveryDefinitionHasACpuTwinAndATestCase) {
  const std::vector<const KernelDef*> defs = cuda_elementwise_definitions();
  EXPECT_GE(defs.size(), 50u) << "the CUDA elementwise kernels are not linked in";
  for (const KernelDef* def : defs) {
    SCOPED_TRACE(def->op_type + " since " + std::to_string(def->since));
    bool twin = false;
    for (const KernelDef& cpu : KernelRegistry::instance().definitions()) {
      if (cpu.device != DeviceType::CPU || cpu.domain != def->domain ||
          cpu.op_type != def->op_type || cpu.since != def->since || cpu.until != def->until)
        continue;
      twin = true;
      for (DType t : def->dtypes)
        EXPECT_TRUE(cpu.dtypes.empty() || std::count(cpu.dtypes.begin(), cpu.dtypes.end(), t))
            << "the CPU kernel does not take " << dtype_name(t);
    }
    EXPECT_TRUE(twin) << "no CPU definition with the same op_type and opset range";
    auto it = cases().find(def->op_type);
    if (it == cases().end()) {
      ADD_FAILURE() << "no case in cases() of cuda_elementwise_test.cpp: add one";
      continue;
    }
    EXPECT_FALSE(shape_sets(it->second.inputs.size()).empty());
    EXPECT_FALSE(def->dtypes.empty() && it->second.untyped_dtypes.empty())
        << "neither the definition nor the case lists dtypes";
  }
}

/// The element offset into `in` (broadcast to `out`) of output index i, by the numpy rule.
int64_t plain_offset(const Shape& out, const Shape& in, int64_t i) {
  int64_t offset = 0, stride = 1;
  for (size_t d = out.size(); d-- > 0;) {
    const int64_t index = i % out[d];
    i /= out[d];
    const size_t back = out.size() - 1 - d;
    if (back >= in.size()) continue;
    const int64_t dim = in[in.size() - 1 - back];
    if (dim != 1) offset += index * stride;
    stride *= dim;
  }
  return offset;
}

/// Expects `layout` to map every output index to the inputs' offsets as numpy broadcasting
/// does, through the path its access pattern selects on the device.
template <int N>
void expect_maps_like_broadcasting(const cuda_ew::Layout<N>& layout,
                                   const std::array<Shape, N>& ins) {
  ASSERT_EQ(layout.numel, shape_numel(layout.out_shape));
  for (int64_t i = 0; i < layout.numel; ++i) {
    int64_t off[N];
    for (int k = 0; k < N; ++k) off[k] = i;
    if (layout.access == cuda_ew::Access::ScalarFirst) off[0] = 0;
    if (layout.access == cuda_ew::Access::ScalarSecond) off[1] = 0;
    if (layout.access == cuda_ew::Access::Strided) {
      cuda_ew::input_offsets(layout.index, i, off);
      int32_t narrow[N];  // the arithmetic of Strided32 launches
      cuda_ew::input_offsets(layout.index, static_cast<int32_t>(i), narrow);
      for (int k = 0; k < N; ++k)
        ASSERT_EQ(narrow[k], off[k]) << "32-bit offset of input " << k << " at " << i;
    }
    for (int k = 0; k < N; ++k)
      ASSERT_EQ(off[k], plain_offset(layout.out_shape, ins[k], i)) << "input " << k << " at " << i;
  }
}

/// A context to plan in (planning needs the node only, for its attributes and messages).
struct PlanningContext {
  explicit PlanningContext(Node n) : node(std::move(n)), ctx(node, *execution, {}, outputs) {}
  Node node;
  std::unique_ptr<ExecutionContext> execution = testing::cpu_execution(1);
  std::vector<Tensor> outputs = std::vector<Tensor>(1);
  KernelContext ctx;
};

TEST(CudaElementwiseLayout, BinaryPicksTheCheapestAccessAndMapsLikeBroadcasting) {
  using cuda_ew::Access;
  struct Case {
    Shape a, b, out;
    Access access;
    int rank;  // merged dims of the Strided path
  };
  const std::vector<Case> cases = {
      {{2, 3, 4}, {2, 3, 4}, {2, 3, 4}, Access::Contiguous, 0},
      {{2, 3, 4}, {1, 1, 2, 3, 4}, {1, 1, 2, 3, 4}, Access::Contiguous, 0},
      {{2, 3, 4}, {1, 1, 3, 4}, {1, 2, 3, 4}, Access::Strided, 2},
      {{}, {}, {}, Access::Contiguous, 0},
      {{2, 3, 4}, {1}, {2, 3, 4}, Access::ScalarSecond, 0},
      {{}, {2, 3, 4}, {2, 3, 4}, Access::ScalarFirst, 0},
      {{2, 3, 4}, {3, 1}, {2, 3, 4}, Access::Strided, 3},
      {{2, 3, 4}, {2, 1, 4}, {2, 3, 4}, Access::Strided, 3},
      {{3, 1}, {2, 1, 4}, {2, 3, 4}, Access::Strided, 3},
      {{2, 3, 4, 5}, {4, 5}, {2, 3, 4, 5}, Access::Strided, 2},
      {{8, 16, 5, 5}, {16, 1, 1}, {8, 16, 5, 5}, Access::Strided, 3},
      {{2, 3, 0}, {3, 1}, {2, 3, 0}, Access::Strided, 0},
  };
  PlanningContext planning(testing::make_node("Add", {"a", "b"}, {"y"}));
  for (const Case& c : cases) {
    SCOPED_TRACE(shape_to_string(c.a) + " with " + shape_to_string(c.b));
    const auto layout = cuda_ew::binary_layout(planning.ctx, c.a, c.b, false);
    EXPECT_EQ(shape_to_string(layout.out_shape), shape_to_string(c.out));
    EXPECT_EQ(static_cast<int>(layout.access), static_cast<int>(c.access));
    if (c.access == Access::Strided && c.rank > 0) {
      EXPECT_EQ(layout.index.rank, c.rank);
    }
    expect_maps_like_broadcasting<2>(layout, {c.a, c.b});
  }
  try {
    cuda_ew::binary_layout(planning.ctx, {2, 3}, {4}, false);
    ADD_FAILURE() << "no error for incompatible shapes";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot be broadcast together"), std::string::npos)
        << e.what();
  }
}

TEST(CudaElementwiseLayout, StridedLaunchesIn32BitArithmeticBelow2To31Elements) {
  EXPECT_TRUE(cuda_ew::fits_32_bit_index(0));
  EXPECT_TRUE(cuda_ew::fits_32_bit_index((int64_t{1} << 31) - 1));
  EXPECT_FALSE(cuda_ew::fits_32_bit_index(int64_t{1} << 31));
}

TEST(CudaElementwiseLayout, LegacyBroadcastAlignsBAtTheAxis) {
  Node node = testing::make_node("Add", {"a", "b"}, {"y"});
  node.attributes = {{"broadcast", Attribute::of_int(1)}, {"axis", Attribute::of_int(1)}};
  PlanningContext planning(node);
  const auto layout = cuda_ew::binary_layout(planning.ctx, {2, 3, 4}, {3}, true);
  EXPECT_EQ(shape_to_string(layout.out_shape), "[2, 3, 4]");
  expect_maps_like_broadcasting<2>(layout, {Shape{2, 3, 4}, Shape{1, 3, 1}});
  PlanningContext no_broadcast(testing::make_node("Add", {"a", "b"}, {"y"}));
  EXPECT_THROW(cuda_ew::binary_layout(no_broadcast.ctx, {2, 3, 4}, {3}, true), Error);
}

TEST(CudaElementwiseLayout, WhereBroadcastsAllThreeInputs) {
  PlanningContext planning(testing::make_node("Where", {"c", "x", "y"}, {"z"}));
  const std::vector<std::array<Shape, 3>> cases = {{Shape{2, 3, 4}, {2, 3, 4}, {2, 3, 4}},
                                                   {Shape{2, 3, 4}, {3, 1}, {1}},
                                                   {Shape{3, 1}, {2, 1, 4}, {}},
                                                   {Shape{1}, {2, 3, 4}, {4}}};
  for (const auto& ins : cases) {
    SCOPED_TRACE(shape_to_string(ins[0]) + " " + shape_to_string(ins[1]) + " " +
                 shape_to_string(ins[2]));
    const Tensor cond = Tensor::empty(ins[0], DType::Bool);
    const Tensor x = Tensor::empty(ins[1], DType::Float32);
    const Tensor y = Tensor::empty(ins[2], DType::Float32);
    expect_maps_like_broadcasting<3>(cuda_ew::where_layout(planning.ctx, cond, x, y), ins);
  }
  const Tensor x = Tensor::empty({2}, DType::Float32);
  EXPECT_THROW(cuda_ew::where_layout(planning.ctx, x, x, x), Error);  // a float condition
}

TEST(CudaElementwiseLayout, MoreMergedDimsThanTheKernelsTakeFailClearly) {
  PlanningContext planning(testing::make_node("Add", {"a", "b"}, {"y"}));
  // Alternating broadcast dims cannot merge: 10 dims.
  const Shape a = {2, 1, 2, 1, 2, 1, 2, 1, 2, 1}, b = {1, 2, 1, 2, 1, 2, 1, 2, 1, 2};
  try {
    cuda_ew::binary_layout(planning.ctx, a, b, false);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("needs 10 dims after merging; the CUDA elementwise "
                                         "kernels handle at most 8"),
              std::string::npos)
        << e.what();
  }
  // Dims that broadcast alike merge, so a high rank alone does not fail.
  const Shape high(12, 2);
  EXPECT_EQ(cuda_ew::binary_layout(planning.ctx, high, {1}, false).access,
            cuda_ew::Access::ScalarSecond);
  Shape ones_inside = high;
  ones_inside[11] = 1;
  EXPECT_EQ(cuda_ew::binary_layout(planning.ctx, high, ones_inside, false).index.rank, 2);
}

TEST(CudaElementwise, EveryDefinitionMatchesTheCpu) {
  DPRUN_REQUIRE_CUDA_GPU();
  std::mt19937 rng(1234);
  for (const KernelDef* def : cuda_elementwise_definitions()) {
    auto it = cases().find(def->op_type);
    ASSERT_NE(it, cases().end()) << "no case for CUDA elementwise op " << def->op_type;
    const OpCase& c = it->second;
    const int64_t opset = test_opset(*def);
    const std::vector<DType>& dtypes = def->dtypes.empty() ? c.untyped_dtypes : def->dtypes;
    for (DType dtype : dtypes) {
      for (const Attributes& attributes : c.attribute_sets) {
        const Node node = node_for(*def, c.inputs.size(), attributes);
        for (const std::vector<Shape>& shapes : shape_sets(c.inputs.size())) {
          const std::vector<Tensor> inputs = random_inputs(c, shapes, dtype, rng);
          std::ostringstream where;
          where << def->op_type << " opset " << opset << " " << dtype_name(dtype) << " inputs "
                << shapes_text(inputs) << " with " << attributes.size() << " attribute(s)";
          for (const auto& [name, a] : attributes) where << " " << name;
          SCOPED_TRACE(where.str());
          expect_cuda_matches_cpu(node, inputs, opset);
        }
      }
    }
  }
}

/// Before opset 7 binary ops broadcast only with broadcast=1, B aligned to A at `axis`.
TEST(CudaElementwise, LegacyBroadcastMatchesTheCpu) {
  DPRUN_REQUIRE_CUDA_GPU();
  std::mt19937 rng(99);
  const Attributes trailing = attrs({{"broadcast", Attribute::of_int(1)}});
  const Attributes at_axis_1 =
      attrs({{"broadcast", Attribute::of_int(1)}, {"axis", Attribute::of_int(1)}});
  const std::vector<std::pair<Attributes, std::vector<Shape>>> variants = {
      {{}, {{2, 3, 4}, {2, 3, 4}}},
      {trailing, {{2, 3, 4}, {4}}},
      {trailing, {{2, 3, 4}, {}}},
      {at_axis_1, {{2, 3, 4}, {3}}},
      {at_axis_1, {{2, 3, 4}, {3, 4}}}};
  int tested = 0;
  for (const KernelDef* def : cuda_elementwise_definitions()) {
    auto it = cases().find(def->op_type);
    ASSERT_NE(it, cases().end()) << "no case for CUDA elementwise op " << def->op_type;
    const OpCase& c = it->second;
    if (def->since > 6 || c.inputs.size() != 2) continue;
    ++tested;
    for (const auto& [attributes, shapes] : variants) {
      const std::vector<Tensor> inputs = random_inputs(c, shapes, def->dtypes.front(), rng);
      SCOPED_TRACE(def->op_type + " opset 6 inputs " + shapes_text(inputs));
      expect_cuda_matches_cpu(node_for(*def, 2, attributes), inputs, 6);
    }
  }
  EXPECT_GT(tested, 0);
}

TEST(CudaElementwise, PowTakesAnExponentOfAnotherDtype) {
  DPRUN_REQUIRE_CUDA_GPU();
  std::mt19937 rng(7);
  const OpCase& c = cases().at("Pow");
  const Node node = testing::make_node("Pow", {"x", "e"}, {"y"});
  for (DType base : {DType::Float32, DType::Float64}) {
    for (DType exponent : kNumericTypes) {  // ONNX's test_pow_types_* cover them all
      const bool is_unsigned = exponent == DType::UInt8 || exponent == DType::UInt16 ||
                               exponent == DType::UInt32 || exponent == DType::UInt64;
      OpCase exponents = c;
      exponents.lo = is_unsigned ? 0 : -3;
      exponents.hi = 3;
      const std::vector<Tensor> inputs = {random_tensor({2, 3, 4}, base, c, rng),
                                          random_tensor({3, 1}, exponent, exponents, rng)};
      SCOPED_TRACE(std::string(dtype_name(base)) + " ^ " + std::string(dtype_name(exponent)));
      expect_cuda_matches_cpu(node, inputs, 17);
    }
  }
}

}  // namespace
}  // namespace dprun
