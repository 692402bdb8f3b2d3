// Where the training graphs of models/training run on a GPU, in every training precision: a
// simulated device's plan follows the CUDA kernels' definitions, so it shows without a GPU what
// cuda:N would do. Every node must run on the device (or be shape arithmetic on the host), no
// 16-bit node may need float32 Casts around it, and a step must read nothing back: each of
// those would cost a copy and a wait for the GPU in every training step.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "accelerator_test_util.h"
#include "engine/autograd/training_graph.h"
#include "engine/backend.h"
#include "engine/plan.h"
#include "engine/plan_reads.h"
#include "loader/onnx_loader.h"

namespace dprun {
namespace {

namespace fs = std::filesystem;

fs::path training_dir() {
  const char* root = std::getenv("DPRUN_SOURCE_DIR");
  return fs::path(root ? root : DPRUN_SOURCE_DIR_DEFAULT) / "models" / "training";
}

/// The loss that the case's .args file gives `dprun train` (--loss, --class-dim).
LossSpec loss_of(const fs::path& args_file) {
  std::ifstream in(args_file);
  LossSpec loss;
  for (std::string word; in >> word;) {
    if (word == "--loss" && in >> word) loss.kind = parse_loss_kind(word);
    if (word == "--class-dim" && in >> word) loss.class_dim = std::stoll(word);
  }
  return loss;
}

int64_t casts(const Graph& g) {
  return std::count_if(g.nodes.begin(), g.nodes.end(),
                       [](const Node& n) { return n.op_type == "Cast"; });
}

TEST(TrainingPlacement, EveryCaseRunsWhollyOnTheGpuInEveryPrecision) {
  if (!testing::has_cuda_kernels()) GTEST_SKIP() << "this build has no CUDA kernels to plan with";
  int cases = 0;
  for (const auto& entry : fs::directory_iterator(training_dir())) {
    if (entry.path().extension() != ".args") continue;
    const fs::path model = fs::path(entry.path()).replace_extension(".onnx");
    const std::shared_ptr<Graph> forward = load_graph(model.string());
    for (DType precision : {DType::Float32, DType::BFloat16, DType::Float16}) {
      SCOPED_TRACE(model.filename().string() + " in " + std::string(dtype_name(precision)));
      TrainingSpec spec{.loss = loss_of(entry.path()), .precision = precision};
      const std::shared_ptr<const Graph> training = build_training_graph(*forward, spec).graph;
      const std::shared_ptr<const Graph> compiled =
          backend_for(DeviceType::Sim).rewrite_graph(training, {});
      EXPECT_EQ(casts(*compiled), casts(*training)) << "16-bit nodes run in float32 between Casts";
      for (const NodePlacement& p : place_nodes(*compiled, DeviceType::Sim))
        EXPECT_TRUE(p.shape_arithmetic || p.device == DeviceType::Sim)
            << p.node->describe() << " runs on the host: " << p.why_not;
      EXPECT_EQ(device_reads_per_run(*Plan::build(compiled, DeviceType::Sim)).size(), 0u);
    }
    ++cases;
  }
  EXPECT_EQ(cases, 13);
}

}  // namespace
}  // namespace dprun
