// Float16 and bfloat16 nodes without a 16-bit kernel (engine/rewrites/float32_fallback.h): which
// nodes are rewritten and how, and results equal to the float32 kernels' rounded to 16 bits.
#include "engine/rewrites/float32_fallback.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>

#include "accelerator_test_util.h"
#include "engine/half.h"
#include "engine/model.h"
#include "engine/plan.h"
#include "graph_test_util.h"
#include "half_test_util.h"

namespace dprun {
namespace {

using testing::typed;

/// A tensor of `dtype` holding values of a few significant bits, exact in every float type.
Tensor small_values(DType dtype, const Shape& shape, unsigned seed) {
  return testing::eighths(dtype, shape, seed).narrow;
}

/// Converts a float32 tensor to `dtype`, rounding each element to nearest even.
Tensor rounded_to(const Tensor& x, DType dtype) {
  Tensor t = Tensor::empty(x.shape(), dtype);
  for (int64_t i = 0; i < x.numel(); ++i) {
    if (dtype == DType::Float16)
      t.data<Float16>()[i] = Float16(x.data<float>()[i]);
    else
      t.data<BFloat16>()[i] = BFloat16(x.data<float>()[i]);
  }
  return t;
}

Tensor widened(const Tensor& x) {
  Tensor t = Tensor::empty(x.shape(), DType::Float32);
  for (int64_t i = 0; i < x.numel(); ++i)
    t.data<float>()[i] = static_cast<float>(x.item_as_double(i));
  return t;
}

std::vector<std::string> op_types(const Graph& g) {
  std::vector<std::string> ops;
  for (const Node& n : g.nodes) ops.push_back(n.op_type);
  return ops;
}

/// test.half::Twice, y = 2x: an op whose only kernel is a float32 one on the CPU.
constexpr const char* kTestDomain = "test.half";

class TwiceKernel : public OpKernel {
 public:
  explicit TwiceKernel(const KernelInfo&) {}
  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    Tensor& y = ctx.allocate_output(0, x.shape(), DType::Float32);
    for (int64_t i = 0; i < x.numel(); ++i) y.data<float>()[i] = 2.f * x.data<float>()[i];
  }
};

DPRUN_REGISTER_KERNEL({.domain = kTestDomain,
                       .op_type = "Twice",
                       .dtypes = {DType::Float32},
                       .factory = make_kernel<TwiceKernel>});

/// x [2, 3] of `dtype` -> Twice -> y -> Exp -> z (outputs y and z).
std::shared_ptr<Graph> twice_exp_graph(DType dtype, int64_t opset = 17) {
  auto g = std::make_shared<Graph>();
  g->opset_imports[""] = opset;
  g->opset_imports[kTestDomain] = 1;
  g->inputs = {{"x", typed(dtype, {2, 3})}};
  g->nodes.push_back(testing::make_node("Twice", {"x"}, {"y"}));
  g->nodes.back().domain = kTestDomain;
  g->nodes.back().name = "twice";
  g->nodes.push_back(testing::make_node("Exp", {"y"}, {"z"}));
  g->nodes.back().name = "exp";
  g->value_types["y"] = typed(dtype, {2, 3});
  g->outputs = {{"y", typed(dtype, {2, 3})}, {"z", typed(dtype, {2, 3})}};
  return g;
}

class HalfInFloat : public ::testing::TestWithParam<DType> {};

TEST_P(HalfInFloat, CastsAroundANodeWithoutA16BitKernelAndKeepsEveryName) {
  auto g = twice_exp_graph(GetParam());
  std::shared_ptr<Graph> out = compute_half_in_float(*g, DeviceType::CPU);
  ASSERT_NE(out, nullptr);
  // Exp takes 16 bits on the CPU where Twice does not: only Twice is rewritten.
  const bool exp_native =
      KernelRegistry::instance()
          .candidates({g->nodes[1], 17, DeviceType::CPU, {typed(GetParam(), {2, 3})}, {}, g.get()})
          .size() > 0;
  std::vector<std::string> want = {"Cast", "Twice", "Cast", "Exp"};
  if (!exp_native) want = {"Cast", "Twice", "Cast", "Cast", "Exp", "Cast"};
  EXPECT_EQ(op_types(*out), want);
  const Node& twice = out->nodes[1];
  EXPECT_EQ(twice.domain, kTestDomain);
  EXPECT_EQ(twice.inputs, (std::vector<std::string>{"x/float32"}));
  EXPECT_EQ(twice.outputs, (std::vector<std::string>{"y/float32"}));
  EXPECT_EQ(out->nodes[0].attr_int("to"), static_cast<int64_t>(DType::Float32));
  EXPECT_EQ(out->nodes[2].outputs, (std::vector<std::string>{"y"}));
  EXPECT_EQ(out->nodes[2].attr_int("to"), static_cast<int64_t>(GetParam()));
  EXPECT_EQ(out->type_of("y/float32")->to_string(), "float32[2, 3]");
  EXPECT_EQ(out->type_of("y")->dtype, GetParam());
  // Inputs and outputs are those of the graph.
  EXPECT_EQ(out->inputs[0].name, "x");
  EXPECT_EQ(out->outputs[0].name, "y");
  EXPECT_EQ(out->outputs[1].name, "z");
}

TEST_P(HalfInFloat, ResultsAreTheFloat32KernelsRoundedOncePerNode) {
  const DType dtype = GetParam();
  Tensor x = small_values(dtype, {2, 3}, 3);
  Model model(twice_exp_graph(dtype), Device::cpu());
  std::vector<Tensor> got = model.run(std::vector<Tensor>{x});
  ASSERT_EQ(got.size(), 2u);
  ASSERT_EQ(got[0].dtype(), dtype);
  ASSERT_EQ(got[1].dtype(), dtype);
  // Hand-computed: 2x is exact; Exp reads the rounded y and is rounded once.
  Tensor y = widened(x);
  for (int64_t i = 0; i < y.numel(); ++i) y.data<float>()[i] *= 2.f;
  Tensor y16 = rounded_to(y, dtype);
  Tensor z = widened(y16);
  for (int64_t i = 0; i < z.numel(); ++i) z.data<float>()[i] = std::exp(z.data<float>()[i]);
  Tensor z16 = rounded_to(z, dtype);
  for (int64_t i = 0; i < z.numel(); ++i) {
    EXPECT_EQ(got[0].item_as_double(i), y16.item_as_double(i)) << "y element " << i;
    EXPECT_EQ(got[1].item_as_double(i), z16.item_as_double(i)) << "z element " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, HalfInFloat, ::testing::Values(DType::Float16, DType::BFloat16),
                         [](const ::testing::TestParamInfo<DType>& info) {
                           return std::string(dtype_name(info.param));
                         });

TEST(HalfInFloatRewrite, AValueReadByTwoRewrittenNodesIsCastOnce) {
  auto g = std::make_shared<Graph>();
  g->opset_imports[""] = 17;
  g->opset_imports[kTestDomain] = 1;
  g->inputs = {{"x", typed(DType::Float16, {2, 2})}};
  g->nodes.push_back(testing::make_node("Twice", {"x"}, {"a"}));
  g->nodes.push_back(testing::make_node("Max", {"x", "a"}, {"m"}));
  g->nodes.push_back(testing::make_node("Twice", {"a"}, {"b"}));
  g->nodes.push_back(testing::make_node("Twice", {"x"}, {"c"}));
  for (Node& n : g->nodes)
    if (n.op_type == "Twice") n.domain = kTestDomain;
  for (const char* v : {"a", "m", "b", "c"}) g->value_types[v] = typed(DType::Float16, {2, 2});
  g->outputs = {{"m", typed(DType::Float16, {2, 2})},
                {"b", typed(DType::Float16, {2, 2})},
                {"c", typed(DType::Float16, {2, 2})}};
  std::shared_ptr<Graph> out = compute_half_in_float(*g, DeviceType::CPU);
  ASSERT_NE(out, nullptr);
  // Max takes float16 on the CPU and reads a and x as they are.
  EXPECT_EQ(op_types(*out), (std::vector<std::string>{"Cast", "Twice", "Cast", "Max", "Cast",
                                                      "Twice", "Cast", "Twice", "Cast"}));
  EXPECT_EQ(out->nodes[1].inputs, (std::vector<std::string>{"x/float32"}));
  EXPECT_EQ(out->nodes[3].inputs, (std::vector<std::string>{"x", "a"}));
  // "a/float32" names the first Twice's float32 result, so a's float32 copy steps around it;
  // the second Twice reads a's float16 value: the first one's rounding stays.
  EXPECT_EQ(out->nodes[1].outputs, (std::vector<std::string>{"a/float32"}));
  EXPECT_EQ(out->nodes[4].inputs, (std::vector<std::string>{"a"}));
  EXPECT_EQ(out->nodes[5].inputs, (std::vector<std::string>{"a/float32_1"}));
  // x is cast once for both Twices that read it.
  EXPECT_EQ(out->nodes[7].inputs, (std::vector<std::string>{"x/float32"}));
}

TEST(HalfInFloatRewrite, NewNamesStepAroundNamesTheGraphHas) {
  auto g = twice_exp_graph(DType::Float16);
  g->nodes.insert(g->nodes.begin(), testing::make_node("Identity", {"x"}, {"x/float32"}));
  g->value_types["x/float32"] = typed(DType::Float16, {2, 3});
  g->outputs.push_back({"x/float32", typed(DType::Float16, {2, 3})});
  std::shared_ptr<Graph> out = compute_half_in_float(*g, DeviceType::CPU);
  ASSERT_NE(out, nullptr);
  const Node& twice = out->nodes[2];
  ASSERT_EQ(twice.op_type, "Twice");
  EXPECT_EQ(twice.inputs[0], "x/float32_1");
}

TEST(HalfInFloatRewrite, LeavesGraphsWhoseNodesAllHaveKernels) {
  auto g = twice_exp_graph(DType::Float32);
  EXPECT_EQ(compute_half_in_float(*g, DeviceType::CPU), nullptr);
}

TEST(HalfInFloatRewrite, LeavesANodeWhoseOutputTypeIsUnknownAndPlanningNamesIt) {
  auto g = twice_exp_graph(DType::Float16);
  g->value_types.erase("y");
  g->outputs = {{"z", typed(DType::Float16, {2, 3})}};
  std::shared_ptr<Graph> out = compute_half_in_float(*g, DeviceType::CPU);
  EXPECT_EQ(out, nullptr);  // Exp reads y, whose type is unknown too
  try {
    Model model(g, Device::cpu());
    FAIL() << "a float16 Twice of unknown output type compiled";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[Twice] node 'twice' (no kernel for dtype float16)"),
              std::string::npos)
        << e.what();
  }
}

TEST(HalfInFloatRewrite, CastsNameTheirTypeBeforeOpset6) {
  auto g = twice_exp_graph(DType::Float16, 5);
  std::shared_ptr<Graph> out = compute_half_in_float(*g, DeviceType::CPU);
  ASSERT_NE(out, nullptr);
  EXPECT_EQ(out->nodes[0].attr_string("to"), "FLOAT");
  EXPECT_EQ(out->nodes[2].attr_string("to"), "FLOAT16");
}

TEST(HalfInFloatRewrite, AGraphOfOtherDomainsOnlyImportsAiOnnxForItsCasts) {
  auto g = std::make_shared<Graph>();
  g->opset_imports[kTestDomain] = 1;
  g->inputs = {{"x", typed(DType::Float16, {2, 3})}};
  g->nodes.push_back(testing::make_node("Twice", {"x"}, {"y"}));
  g->nodes.back().domain = kTestDomain;
  g->outputs = {{"y", typed(DType::Float16, {2, 3})}};
  std::shared_ptr<Graph> out = compute_half_in_float(*g, DeviceType::CPU);
  ASSERT_NE(out, nullptr);
  EXPECT_EQ(op_types(*out), (std::vector<std::string>{"Cast", "Twice", "Cast"}));
  EXPECT_EQ(out->opset_imports,
            (std::map<std::string, int64_t>{{"", 13}, {std::string(kTestDomain), 1}}));
  Model model(g, Device::cpu());
  std::vector<Tensor> y = model.run(std::vector<Tensor>{small_values(DType::Float16, {2, 3}, 9)});
  EXPECT_EQ(y[0].dtype(), DType::Float16);
}

TEST(HalfInFloatRewrite, EveryBackendCompilesTheRewrite) {
  // rewrite_for_device applies it after the backend's own rewrites, for every backend.
  auto g = twice_exp_graph(DType::Float16);
  for (DeviceType type : {DeviceType::CPU, DeviceType::Sim}) {
    Model model(g, Device{type, 0});
    EXPECT_EQ(model.plan()->graph().nodes[1].inputs[0], "x/float32") << device_type_name(type);
  }
}

/// w (a float16 parameter) -> Cast to float32 -> y, a graph output, so a run on `device`
/// returns the Cast's own output tensor: the kept cast while the parameters keep their version,
/// a new one after set_parameter.
void expect_cast_of_parameter_kept(Device device) {
  auto g = std::make_shared<Graph>();
  g->opset_imports[""] = 17;
  g->initializers["w"] = small_values(DType::Float16, {2, 3}, 11);
  Node cast = testing::make_node("Cast", {"w"}, {"y"});
  cast.attributes["to"] = Attribute::of_int(static_cast<int64_t>(DType::Float32));
  g->nodes.push_back(cast);
  g->outputs = {{"y", typed(DType::Float32, {2, 3})}};
  Model model(g, device);
  const Tensor first = model.run(std::vector<Tensor>{})[0];
  const Tensor second = model.run(std::vector<Tensor>{})[0];
  EXPECT_EQ(first.raw_data(), second.raw_data()) << "the cast was made again";
  EXPECT_EQ(second.to(Device::cpu()).item_as_double(0), g->initializers.at("w").item_as_double(0));
  Tensor changed = Tensor::empty({2, 3}, DType::Float16);
  for (int64_t i = 0; i < 6; ++i) changed.data<Float16>()[i] = Float16(static_cast<float>(i));
  model.set_parameter("w", changed);
  const Tensor third = model.run(std::vector<Tensor>{})[0];
  EXPECT_NE(third.raw_data(), first.raw_data());
  const Tensor third_on_host = third.to(Device::cpu());
  for (int64_t i = 0; i < 6; ++i)
    EXPECT_EQ(third_on_host.item_as_double(i), static_cast<double>(i));
}

TEST(HalfInFloatRewrite, ACastOfAParameterIsKeptUntilTheParametersChange) {
  expect_cast_of_parameter_kept(Device::cpu());
}

/// On an accelerator, where Twice has no kernel: the Casts around it run on the device, Twice
/// on the host. Exp may differ by one 16-bit rounding step.
class HalfInFloatOnAccelerators : public testing::AcceleratorTest {};

TEST_P(HalfInFloatOnAccelerators, RunsAsOnTheCpu) {
  auto g = twice_exp_graph(DType::Float16);
  Tensor x = small_values(DType::Float16, {2, 3}, 5);
  Model cpu(g, Device::cpu());
  Model accel(g, device());
  std::map<std::string, DeviceType> placed;
  for (const PlanStep& step : accel.plan()->steps())
    placed[accel.plan()->graph().nodes[step.node_index].op_type] = step.kernel_device;
  EXPECT_EQ(placed.at("Twice"), DeviceType::CPU);
  EXPECT_EQ(placed.at("Cast"), GetParam());
  EXPECT_EQ(placed.at("Exp"), GetParam());
  std::vector<Tensor> want = cpu.run(std::vector<Tensor>{x});
  std::vector<Tensor> got = accel.run(std::vector<Tensor>{x.to(device())});
  ASSERT_EQ(got.size(), want.size());
  for (size_t o = 0; o < want.size(); ++o) {
    Tensor host = got[o].to(Device::cpu());
    ASSERT_EQ(host.dtype(), DType::Float16);
    for (int64_t i = 0; i < want[o].numel(); ++i)
      EXPECT_NEAR(host.item_as_double(i), want[o].item_as_double(i),
                  4e-3 * std::abs(want[o].item_as_double(i)))
          << "output " << o << " element " << i;
  }
}

TEST_P(HalfInFloatOnAccelerators, ACastOfAParameterIsKeptUntilTheParametersChange) {
  expect_cast_of_parameter_kept(device());
}

DPRUN_ON_ACCELERATORS(HalfInFloatOnAccelerators);

}  // namespace
}  // namespace dprun
