// What crosses between the host and the simulated devices (SimBackend::traffic), which is what
// a GPU would move over its links and, for copies back to the host, wait for: a run copies its
// input over and nothing back; DataParallel scatters and gathers once per replica; a training
// step reads back only its loss. And the training graphs of an MLP and of every bundled training
// case, planned for a GPU, keep no node on the host but their shape arithmetic.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "accelerator_test_util.h"
#include "bundled_model_util.h"
#include "engine/autograd/training_graph.h"
#include "engine/backends/sim/sim_backend.h"
#include "engine/kernel.h"
#include "engine/model.h"
#include "engine/parallel/data_parallel.h"
#include "engine/plan.h"
#include "engine/plan_reads.h"
#include "engine/rewrites/device_rewrites.h"
#include "engine/rewrites/op_fusion.h"
#include "engine/training/optimizer.h"
#include "engine/training/trainer.h"
#include "graph_test_util.h"
#include "loader/npy.h"
#include "loader/onnx_loader.h"
#include "op_test_util.h"

namespace dprun {
namespace {

using testing::random_floats;

std::shared_ptr<Graph> mlp_graph() {
  return testing::small_mlp_graph(false);
}

// The copies made while f() runs.
template <class F>
SimTraffic traffic_of(F&& f) {
  const SimTraffic before = SimBackend::instance().traffic();
  f();
  const SimTraffic after = SimBackend::instance().traffic();
  auto minus = [](const SimTraffic::Count& a, const SimTraffic::Count& b) {
    return SimTraffic::Count{a.copies - b.copies, a.bytes - b.bytes};
  };
  return {minus(after.host_to_device, before.host_to_device),
          minus(after.device_to_host, before.device_to_host),
          minus(after.within_device, before.within_device),
          minus(after.between_devices, before.between_devices)};
}

void expect_count(const SimTraffic::Count& got, int64_t copies, int64_t bytes,
                  const std::string& what) {
  EXPECT_EQ(got.copies, copies) << what;
  EXPECT_EQ(got.bytes, bytes) << what;
}

const Tensor kRows = random_floats({24, 4}, 6);     // 384 bytes
const Tensor kTargets = random_floats({24, 3}, 7);  // 288 bytes

TEST(SimTraffic, ARunCopiesItsInputToTheDeviceAndNothingBack) {
  Model model(mlp_graph(), Device::sim(0));
  model.run({kRows});  // the first run makes the device's copies of the parameters
  const SimTraffic t = traffic_of([&] { model.run({kRows}); });
  expect_count(t.host_to_device, 1, 384, "to the device");
  expect_count(t.device_to_host, 0, 0, "to the host");
  expect_count(t.within_device, 0, 0, "within a device");
}

TEST(SimTraffic, DataParallelScattersAndGathersOncePerReplica) {
  DataParallelOptions options;
  options.device_ids = {Device::sim(0), Device::sim(1)};
  DataParallel dp(std::make_shared<Model>(mlp_graph(), Device::sim(0)), options);
  dp.forward({kRows});
  const SimTraffic t = traffic_of([&] { dp.forward({kRows}); });
  expect_count(t.host_to_device, 2, 384, "scatter: a chunk of rows to each device");
  expect_count(t.within_device, 1, 144, "gather: replica 0's rows into the output");
  expect_count(t.between_devices, 1, 144, "gather: replica 1's rows onto sim:0");
  expect_count(t.device_to_host, 0, 0, "to the host");
}

// Every bundled model (models/*.onnx), a run on sim:0 after one that warms it up: its inputs go
// over, a copy each, and so does what shape arithmetic computes on the host for a device kernel
// that reads it as data (the transformer's positions, a Range over its sequence length, for the
// embedding's Gather); nothing comes back (the outputs stay on the device).
TEST(SimTraffic, EveryBundledModelRunCopiesItsInputsOverAndNothingBack) {
  const std::map<std::string, int64_t> to_device = {{"mlp", 1}, {"cnn", 1}, {"transformer", 3}};
  int models = 0;
  for (const auto& [name, path] : testing::bundled_model_paths()) {
    SCOPED_TRACE(name);
    Model model(load_model(path, Device::sim(0)));
    const std::vector<Tensor> inputs = testing::deterministic_inputs(model, 3);
    model.run(inputs);
    const SimTraffic t = traffic_of([&] { model.run(inputs); });
    expect_count(t.device_to_host, 0, 0, "to the host");
    ASSERT_EQ(to_device.count(name), 1u) << "a new model: add its copies to the table";
    EXPECT_EQ(t.host_to_device.copies, to_device.at(name));
    ++models;
  }
  EXPECT_EQ(models, 3);
}

// One SGD step's copies, after two steps that warm the replicas and the optimizer up.
SimTraffic training_step_traffic(const std::vector<Device>& devices) {
  auto model = std::make_shared<Model>(mlp_graph(), devices[0]);
  TrainerOptions options;
  options.training.loss.kind = LossKind::Mse;
  options.parallel.device_ids = devices;
  Trainer trainer(model, options);
  Sgd sgd(trainer.parameters(), {.lr = 0.05, .momentum = 0.9});
  trainer.step({kRows}, kTargets, sgd);
  trainer.step({kRows}, kTargets, sgd);
  return traffic_of([&] { trainer.step({kRows}, kTargets, sgd); });
}

TEST(SimTraffic, ATrainingStepReadsOnlyItsLossBack) {
  // Per replica, to the device: its rows and targets, its loss weight (4 bytes), and the
  // mean's element count (4 bytes: a float that shape arithmetic computes on the host from
  // sizes). The graph's constants went over once per device, in the warm-up. Back: the loss,
  // once.
  for (const std::vector<Device>& devices :
       {std::vector<Device>{Device::sim(0)}, std::vector<Device>{Device::sim(0), Device::sim(1)}}) {
    SCOPED_TRACE(std::to_string(devices.size()) + " device(s)");
    const auto replicas = static_cast<int64_t>(devices.size());
    const SimTraffic t = training_step_traffic(devices);
    expect_count(t.host_to_device, 4 * replicas, 384 + 288 + replicas * (4 + 4), "to the device");
    expect_count(t.device_to_host, 1, 4, "to the host");
    expect_count(t.within_device, 0, 0, "within a device");
    expect_count(t.between_devices, 0, 0, "between devices: NCCL's, not copies");
  }
}

// The ops of the nodes of a training graph that a GPU plan runs on the host other than as
// shape arithmetic.
std::vector<std::string> host_ops(LossKind loss) {
  TrainingGraphSpec spec;
  spec.loss.kind = loss;
  const TrainingGraph training = build_training_graph(*mlp_graph(), spec);
  training.graph->sort_topologically();
  std::vector<std::string> ops;
  for (const NodePlacement& p : place_nodes(*training.graph, DeviceType::CUDA))
    if (p.device == DeviceType::CPU && !p.shape_arithmetic) ops.push_back(p.node->op_type);
  return ops;
}

TEST(TrainingPlans, AnMlpTrainsOnAGpuWithOnlyShapeArithmeticOnTheHost) {
  // The element count of the mean is integer arithmetic over Size results: on the host, not a
  // copy back from the device; the gradient's Sum and cross entropy's loss run on the GPU.
  EXPECT_EQ(host_ops(LossKind::Mse), std::vector<std::string>{});
  EXPECT_EQ(host_ops(LossKind::CrossEntropy), std::vector<std::string>{});
}

// A bundled training case (models/training/NAME.args): its loss, first batch and model.
struct BundledCase {
  std::string name;
  std::filesystem::path model;
  TrainingGraphSpec spec;
  std::vector<Tensor> inputs;  // the first batch's rows of each --input, in the model's order
  Tensor target;               // the first batch's rows of --target, if any
};

std::vector<BundledCase> bundled_training_cases() {
  const std::filesystem::path dir =
      std::filesystem::path(DPRUN_SOURCE_DIR_DEFAULT) / "models" / "training";
  const std::filesystem::path root = dir.parent_path().parent_path();
  std::vector<BundledCase> cases;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".args") continue;
    BundledCase c{entry.path().stem().string(), dir / (entry.path().stem().string() + ".onnx")};
    std::ifstream args_file(entry.path());
    std::vector<std::string> args{std::istream_iterator<std::string>(args_file), {}};
    int64_t batch = 0;
    std::vector<std::string> input_files;
    std::string target_file;
    for (size_t i = 0; i + 1 < args.size(); ++i) {
      const std::string& value = args[i + 1];
      if (args[i] == "--loss") c.spec.loss.kind = parse_loss_kind(value);
      if (args[i] == "--class-dim") c.spec.loss.class_dim = std::stoll(value);
      if (args[i] == "--batch") batch = std::stoll(value);
      if (args[i] == "--input") input_files.push_back(value.substr(value.find('=') + 1));
      if (args[i] == "--target") target_file = value;
    }
    auto rows = [&](const std::string& file) {
      Tensor all = read_npy((root / file).string());
      return all.narrow(0, 0, std::min(batch, all.shape()[0])).clone();
    };
    for (const std::string& file : input_files) c.inputs.push_back(rows(file));
    if (!target_file.empty()) c.target = rows(target_file);
    cases.push_back(std::move(c));
  }
  return cases;
}

// Every bundled training case, in float32, bfloat16 and float16: its training graph, built with
// the case's loss, places no node on the host in a CUDA plan other than shape arithmetic
// (NonZero of a mask over shapes, the run-time unbroadcasting of a gradient, included) and the
// ops listed below that have no CUDA kernel yet, needs no float32 kernel between Casts for a
// 16-bit node but where listed, and its plan reads nothing back from the device but for those
// host nodes (engine/plan_reads.h): each of those costs a copy and a wait in every step.
TEST(TrainingPlans, EveryBundledTrainingCaseRunsOnAGpuButForShapeArithmetic) {
  // Ops with no CUDA kernel yet, which the cases using them run on the host through the
  // fallback (`dprun inspect --devices cuda:0` lists them), each as often as the plan has it.
  const std::map<std::string, std::multiset<std::string>> host_ops = {
      {"lstm_lm_dp2", {"LSTM", "LSTM", "Unique"}},
      {"gru_cls_dp3", {"GRU", "Unique", "Unique"}},
      {"unet_dp2", {"Resize"}},
      {"groupnorm_dp2", {"InstanceNormalization", "InstanceNormalization"}},
  };
  // In 16 bits, the Casts around the nodes that have no 16-bit kernel and so compute in
  // float32, beyond those op fusion keeps.
  const std::map<std::string, int64_t> float32_casts = {{"lstm_lm_dp2", 18},
                                                        {"gru_cls_dp3", 7},
                                                        {"groupnorm_dp2", 3},
                                                        {"mobilenet_dp3", 8},
                                                        {"mobilenet_1dev", 8}};
  auto casts = [](const Graph& g) {
    return std::count_if(g.nodes.begin(), g.nodes.end(),
                         [](const Node& n) { return n.op_type == "Cast"; });
  };
  int cases = 0;
  for (const BundledCase& c : bundled_training_cases()) {
    auto forward = load_graph(c.model.string());
    for (DType precision : {DType::Float32, DType::BFloat16, DType::Float16}) {
      SCOPED_TRACE(c.name + " in " + std::string(dtype_name(precision)));
      TrainingGraphSpec spec = c.spec;
      spec.precision = precision;
      const TrainingGraph training = build_training_graph(*forward, spec);
      training.graph->sort_topologically();
      // A simulated GPU compiles what a CUDA one would (engine/backends/sim).
      const std::shared_ptr<const Graph> compiled =
          rewrite_for_device(backend_for(DeviceType::Sim), training.graph, {});
      // Op fusion takes some Casts into fused nodes (a BatchNormalization gradient's element
      // count, Relu's mask); the rest of the compilation adds none.
      const std::shared_ptr<const Graph> fused = fuse_ops(*training.graph, DeviceType::Sim);
      const auto islands = float32_casts.find(c.name);
      const int64_t extra =
          precision == DType::Float32 || islands == float32_casts.end() ? 0 : islands->second;
      EXPECT_EQ(casts(*compiled), casts(fused ? *fused : *training.graph) + extra)
          << "nodes in float32 between Casts";
      std::multiset<std::string> on_host;
      for (const NodePlacement& p : place_nodes(*compiled, DeviceType::CUDA))
        if (p.device == DeviceType::CPU && !p.shape_arithmetic) on_host.insert(p.node->op_type);
      const auto expected = host_ops.find(c.name);
      EXPECT_EQ(on_host,
                expected == host_ops.end() ? std::multiset<std::string>{} : expected->second);
      // Only the nodes that run on the host read values back from the device.
      for (const DeviceRead& r : device_reads_per_run(*Plan::build(compiled, DeviceType::CUDA)))
        if (!on_host.count(r.reader->op_type))
          ADD_FAILURE() << r.value << " is read back for " << r.reader->describe();
    }
    ++cases;
  }
  EXPECT_EQ(cases, 31);
}

// Every bundled training case, one SGD step on sim:0 after two that warm it up: only the loss
// comes back to the host; what goes to the device is the batch, the loss weight, and the small
// integers shape arithmetic computes on the host for device kernels (one per mean: the element
// count; a BatchNormalization gradient, fused into BatchNormTrainingGrad, counts on the device).
TEST(SimTraffic, EveryBundledTrainingCaseReadsOnlyItsLossBack) {
  // Copies to the device per step: the inputs and target, the loss weight, the counts.
  const std::map<std::string, int64_t> to_device = {{"mlp_sgd", 3},
                                                    {"mlp_nesterov_dp3", 3},
                                                    {"mlp_clip_dp3", 3},
                                                    {"mlp_warmup_cosine_dp2", 3},
                                                    {"mlp_step_adam", 3},
                                                    {"mlp_adam", 3},
                                                    {"mlp_adamw", 3},
                                                    {"losses_mse", 4},
                                                    {"losses_l1", 4},
                                                    {"losses_nll", 3},
                                                    {"loss_none", 5},
                                                    {"losses_bce_with_logits", 4},
                                                    {"cnn_bn_1dev", 6},
                                                    {"cnn_bn_dp3", 6},
                                                    {"cnn_bn_accum_ignore_dp2", 6},
                                                    {"resnet_mini", 16},
                                                    {"gpt_adamw", 6},
                                                    {"gpt_adamw_nodecay_dp2", 6},
                                                    {"gpt_smooth_ignore", 6},
                                                    {"gpt_ragged_dp3", 6},
                                                    {"mlp_param_lr_dp2", 3},
                                                    {"mobilenet_dp3", 16},
                                                    {"mobilenet_1dev", 16},
                                                    {"shufflenet_dp2", 17},
                                                    {"convnext_dp2", 4},
                                                    {"vit_adamw_dp2", 3},
                                                    {"unet_dp2", 9},
                                                    {"dcgan_dp2", 6},
                                                    {"lstm_lm_dp2", 8},
                                                    {"gru_cls_dp3", 9},
                                                    {"groupnorm_dp2", 6}};
  // Copies back to the host per step where nodes run on the host (TrainingPlans above lists
  // them): their inputs, and the loss. Every other case reads back the loss alone.
  const std::map<std::string, int64_t> to_host = {
      {"lstm_lm_dp2", 14}, {"gru_cls_dp3", 7}, {"unet_dp2", 3}, {"groupnorm_dp2", 7}};
  int cases = 0;
  for (const BundledCase& c : bundled_training_cases()) {
    SCOPED_TRACE(c.name);
    auto model = std::make_shared<Model>(load_model(c.model.string(), Device::sim(0)));
    TrainerOptions options;
    options.training = c.spec;
    options.parallel.device_ids = {Device::sim(0)};
    Trainer trainer(model, options);
    Sgd sgd(trainer.parameters(), {.lr = 0.01});
    trainer.step(c.inputs, c.target, sgd);
    trainer.step(c.inputs, c.target, sgd);
    const SimTraffic t = traffic_of([&] { trainer.step(c.inputs, c.target, sgd); });
    if (auto host = to_host.find(c.name); host != to_host.end())
      EXPECT_EQ(t.device_to_host.copies, host->second) << "to the host";
    else
      expect_count(t.device_to_host, 1, 4, "to the host: the float32 loss");
    ASSERT_EQ(to_device.count(c.name), 1u) << "a new case: add its copies to the table";
    EXPECT_EQ(t.host_to_device.copies, to_device.at(c.name));
    ++cases;
  }
  EXPECT_EQ(cases, static_cast<int>(to_device.size()));
}

}  // namespace
}  // namespace dprun
