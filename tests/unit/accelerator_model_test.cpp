// Models on accelerators against the same model on cpu:0: host fallbacks between device
// kernels, shape arithmetic kept on the host, strings and sequences on the host, and the
// bundled models on one device and data-parallel over several. Runs on the simulated devices
// everywhere (where a missing or extra copy between host and device memory fails) and on CUDA
// GPUs where present.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "accelerator_test_util.h"
#include "bundled_model_util.h"
#include "engine/model.h"
#include "engine/parallel/data_parallel.h"
#include "graph_test_util.h"
#include "loader/onnx_loader.h"
#include "op_test_util.h"

namespace dprun {
namespace {

using AcceleratorModel = testing::AcceleratorTest;

Tensor rows(int64_t n, int64_t width) {
  Tensor t = Tensor::empty({n, width}, DType::Float32);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = static_cast<float>(i) * 0.5f;
  return t;
}

// Every element within 1e-4 relative of the CPU's, with an absolute floor of 1e-6 of the
// tensor's largest magnitude (float32 sums in another order, fused or not); exact for integers.
void expect_matches(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  ASSERT_EQ(got.dtype(), want.dtype()) << what;
  const Tensor g = got.to(Device::cpu()), w = want.to(Device::cpu());
  double scale = 0;
  for (int64_t i = 0; i < w.numel(); ++i) scale = std::max(scale, std::fabs(w.item_as_double(i)));
  for (int64_t i = 0; i < w.numel(); ++i) {
    const double a = g.item_as_double(i), b = w.item_as_double(i);
    ASSERT_NEAR(a, b, 1e-4 * std::fabs(b) + 1e-6 * scale) << what << ", element " << i;
  }
}

TEST_P(AcceleratorModel, ShapeArithmeticOnTheHostGivesTheCpuResults) {
  const auto graph = testing::flatten_by_shape_graph();
  const Tensor x = testing::random_floats({5, 3, 4}, 11);
  const Tensor want = Model(graph, Device::cpu()).run({x})[0];
  Model model(graph, device());
  for (int run = 0; run < 2; ++run) {  // the second run reuses the plan's host copies
    const Tensor got = model.run({x})[0];
    EXPECT_EQ(got.device(), device());
    expect_matches(got, want, "y");
  }
}

TEST_P(AcceleratorModel, AShapeReadAsDataIsCopiedToTheDevice) {
  const auto graph = testing::gather_by_shape_graph();
  const Tensor x = testing::int64_vector({7, 8, 9, 10, 11, 12});
  const Tensor got =
      Model(graph, device()).run(std::vector<Tensor>{x, Tensor::zeros({3}, DType::Float32)})[0];
  EXPECT_EQ(got.device(), device());
  EXPECT_EQ(testing::values_of<int64_t>(got.to(Device::cpu())), std::vector<int64_t>{10});
}

TEST_P(AcceleratorModel, AnIntegerDivRunsOnTheHostAndStillFailsOnAZeroDivisor) {
  Model model(testing::integer_div_graph(), device());
  std::vector<Tensor> out = model.run({rows(4, 3)});
  EXPECT_EQ(out[0].device(), device());
  EXPECT_EQ(testing::values_of<int64_t>(out[0].to(Device::cpu())), (std::vector<int64_t>{1, 1}));
  try {
    model.run({Tensor::empty({0, 3}, DType::Float32)});  // 0 / 0
    FAIL() << "no error for a zero divisor";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "[Div] node 'Div_1': integer division by zero");
  }
}

TEST_P(AcceleratorModel, StringsAndSequencesStayOnTheHost) {
  // A string input, a host-only op on it, and a sequence built from device values and read back.
  using testing::make_node;
  Node lower = make_node("StringNormalizer", {"words"}, {"lowered"});
  lower.attributes["case_change_action"] = Attribute::of_string("LOWER");
  auto graph =
      testing::make_graph({lower, make_node("SequenceConstruct", {"x", "x"}, {"seq"}),
                           make_node("ConcatFromSequence", {"seq"}, {"both"})},
                          {{"words", DType::String}, {"x", DType::Float32}}, {"lowered", "both"});
  graph->nodes[2].attributes["axis"] = Attribute::of_int(0);
  graph->opset_imports[""] = 17;
  Model model(graph, device());
  Tensor words = Tensor::empty({2}, DType::String);
  words.data<std::string>()[0] = "MONDAY";
  words.data<std::string>()[1] = "Tuesday";
  std::vector<Tensor> out = model.run(std::vector<Tensor>{words, rows(2, 3)});
  EXPECT_EQ(out[0].device(), Device::cpu());
  EXPECT_EQ(out[0].data<std::string>()[0], "monday");
  EXPECT_EQ(out[0].data<std::string>()[1], "tuesday");
  EXPECT_EQ(out[1].device(), device());
  Tensor both = out[1].to(Device::cpu());
  ASSERT_EQ(both.shape(), (Shape{4, 3}));
  for (int64_t i = 0; i < 6; ++i) {
    EXPECT_EQ(both.data<float>()[i], static_cast<float>(i) * 0.5f);
    EXPECT_EQ(both.data<float>()[6 + i], static_cast<float>(i) * 0.5f);
  }
}

TEST_P(AcceleratorModel, TheBundledModelsGiveTheCpuResultsOnOneDeviceAndOnSeveral) {
  for (const char* name : {"mlp", "cnn", "transformer"}) {
    SCOPED_TRACE(name);
    auto cpu_model =
        std::make_shared<Model>(load_model(testing::bundled_model_path(name), Device::cpu(0)));
    const std::vector<Tensor> inputs = testing::deterministic_inputs(*cpu_model, 7);
    const std::vector<Tensor> want = cpu_model->run(inputs);
    const std::vector<Tensor> alone =
        load_model(testing::bundled_model_path(name), device()).run(inputs);
    ASSERT_EQ(alone.size(), want.size());
    for (size_t o = 0; o < want.size(); ++o) {
      EXPECT_EQ(alone[o].device(), device());
      expect_matches(alone[o], want[o], "output " + std::to_string(o) + " on one device");
    }
    auto model = std::make_shared<Model>(load_model(testing::bundled_model_path(name), device()));
    DataParallelOptions options;
    options.device_ids = devices();
    DataParallel parallel(model, options);
    for (int call = 0; call < 2; ++call) {  // the second call reuses the replicas
      const std::vector<Tensor> got = parallel.forward(inputs);
      ASSERT_EQ(got.size(), want.size());
      for (size_t o = 0; o < want.size(); ++o)
        expect_matches(got[o], want[o], "output " + std::to_string(o) + " data-parallel");
    }
  }
}

DPRUN_ON_ACCELERATORS(AcceleratorModel);

}  // namespace
}  // namespace dprun
