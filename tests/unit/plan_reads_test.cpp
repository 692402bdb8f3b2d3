// device_reads_per_run (engine/plan_reads.h), the static count of what a run copies back from
// its device, against the copies a simulated device makes back to the host in that run
// (SimBackend::traffic), on graphs that read back and on the bundled models, which do not.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <optional>

#include "accelerator_test_util.h"
#include "bundled_model_util.h"
#include "engine/backends/sim/sim_backend.h"
#include "engine/kernel.h"
#include "engine/model.h"
#include "engine/plan_reads.h"
#include "graph_test_util.h"
#include "loader/onnx_loader.h"

namespace dprun {
namespace {

// The copies a second run of `model` (the first warms it up) makes back to the host.
int64_t copies_back(const Model& model, const std::vector<Tensor>& inputs) {
  model.run(inputs);
  const int64_t before = SimBackend::instance().traffic().device_to_host.copies;
  model.run(inputs);
  return SimBackend::instance().traffic().device_to_host.copies - before;
}

std::vector<std::string> described(const std::vector<DeviceRead>& reads) {
  std::vector<std::string> out;
  for (const DeviceRead& r : reads)
    out.push_back(r.value + " -> " + r.reader->op_type + " input " + std::to_string(r.slot) +
                  (r.by_device_kernel ? " on the host by a device kernel" : " on the host"));
  return out;
}

Node node(const std::string& op, std::vector<std::string> inputs, std::vector<std::string> outputs,
          std::map<std::string, Attribute> attributes = {}) {
  Node n;
  n.op_type = op;
  n.inputs = std::move(inputs);
  n.outputs = std::move(outputs);
  n.attributes = std::move(attributes);
  return n;
}

class DeviceReads : public ::testing::Test {};

TEST_F(DeviceReads, AHostFallbackReadsItsDeviceInputBack) {
  // NonZero has no device kernel: Relu's result comes back for it.
  auto g = testing::make_graph({node("Relu", {"x"}, {"r"}), node("NonZero", {"r"}, {"y"})},
                               {{"x", DType::Float32}}, {"y"});
  g->opset_imports[""] = 13;
  Model model(g, Device::sim(0));
  EXPECT_EQ(described(device_reads_per_run(*model.plan())),
            std::vector<std::string>{"r -> NonZero input 0 on the host"});
  EXPECT_EQ(copies_back(model, {Tensor::from_vector<float>({4}, {1, -2, 0, 3})}), 1);
}

TEST_F(DeviceReads, ADeviceKernelReadsAShapeMadeOnTheDeviceBack) {
  // The target shape is computed from data on the device (Abs, Cast): Reshape reads it back.
  Attribute to_int64;
  to_int64.kind = Attribute::Kind::Int;
  to_int64.i = static_cast<int64_t>(DType::Int64);
  auto g = testing::make_graph(
      {node("Abs", {"s"}, {"a"}), node("Cast", {"a"}, {"shape"}, {{"to", to_int64}}),
       node("Reshape", {"x", "shape"}, {"y"})},
      {{"x", DType::Float32}, {"s", DType::Float32}}, {"y"});
  g->opset_imports[""] = 14;
  Model model(g, Device::sim(0));
  EXPECT_EQ(described(device_reads_per_run(*model.plan())),
            std::vector<std::string>{"shape -> Reshape input 1 on the host by a device kernel"});
  EXPECT_EQ(copies_back(model, {Tensor::from_vector<float>({2, 3}, {1, 2, 3, 4, 5, 6}),
                                Tensor::from_vector<float>({2}, {-3, 2})}),
            1);
}

// Sets an environment variable for the scope's lifetime.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) { setenv(name, value, 1); }
  ~ScopedEnv() { unsetenv(name_); }

 private:
  const char* name_;
};

// The bundled models read nothing back; with shape arithmetic kept on the device
// (DPRUN_NO_SHAPE_ARITHMETIC=1) the transformer reads back each Reshape's target and the
// positions' length, and the count still equals the simulated device's copies.
TEST_F(DeviceReads, TheBundledModelsReadNothingBackButWithoutShapeArithmetic) {
  const std::map<std::string, size_t> without_shape_arithmetic = {
      {"mlp", 0}, {"cnn", 0}, {"transformer", 9}};
  int models = 0;
  for (const auto& [name, path] : testing::bundled_model_paths()) {
    SCOPED_TRACE(name);
    ASSERT_EQ(without_shape_arithmetic.count(name), 1u) << "a new model: add it to the table";
    for (bool shape_arithmetic : {true, false}) {
      std::optional<ScopedEnv> off;
      if (!shape_arithmetic) off.emplace("DPRUN_NO_SHAPE_ARITHMETIC", "1");
      Model model(load_model(path, Device::sim(0)));
      const size_t reads = device_reads_per_run(*model.plan()).size();
      EXPECT_EQ(reads, shape_arithmetic ? 0u : without_shape_arithmetic.at(name));
      EXPECT_EQ(copies_back(model, testing::deterministic_inputs(model, 3)),
                static_cast<int64_t>(reads));
    }
    ++models;
  }
  EXPECT_EQ(models, 3);
}

TEST(DeviceReadsOnTheCpu, AreNone) {
  auto g = testing::make_graph({node("Relu", {"x"}, {"r"}), node("NonZero", {"r"}, {"y"})},
                               {{"x", DType::Float32}}, {"y"});
  g->opset_imports[""] = 13;
  Model model(g, Device::cpu());
  EXPECT_EQ(device_reads_per_run(*model.plan()).size(), 0u);
}

}  // namespace
}  // namespace dprun
