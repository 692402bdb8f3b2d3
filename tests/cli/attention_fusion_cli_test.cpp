// The transformer references of models/training (a GPT decoder with a causal Where mask, a ViT
// with its scale on q) train on the CPU with their attention fused (engine/rewrites/
// attention_fusion.h: Attention forward, AttentionGrad for the marked backward) to the losses of
// the same run with op fusion off, within float32's rounding.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <regex>
#include <string>

#include "cli_test_util.h"

namespace dprun {
namespace {

namespace fs = std::filesystem;
using testing::source_path;

// The report of NAME's reference run, with `env` before the command.
nlohmann::json trained(const std::string& name, const std::string& env, const fs::path& out) {
  const fs::path dir = source_path("models/training");
  std::string args = testing::read_text(dir / (name + ".args"));
  args.erase(args.find_last_not_of(" \n") + 1);
  args = std::regex_replace(args, std::regex("models/training/"), dir.string() + "/");
  fs::create_directories(out);
  const testing::CommandResult r = testing::run_shell(
      env + " " + DPRUN_BINARY + " train " + (dir / (name + ".onnx")).string() + " " + args +
      " --save " + (out / "trained.onnx").string() + " --json " + (out / "run.json").string());
  EXPECT_EQ(r.status, 0) << r.output;
  return testing::read_json(out / "run.json");
}

TEST(AttentionFusionCli, TransformersTrainToTheUnfusedLosses) {
  for (const std::string name : {"gpt_adamw", "vit_adamw_dp2"}) {
    SCOPED_TRACE(name);
    const fs::path out = testing::scratch_path("attention_fusion_" + name);
    const nlohmann::json fused = trained(name, "", out / "fused"),
                         plain = trained(name, "DPRUN_NO_FUSION=1", out / "plain");
    const auto got = testing::numbers(fused, "losses"), want = testing::numbers(plain, "losses");
    ASSERT_TRUE(got && want);
    ASSERT_EQ(got->size(), want->size());
    for (size_t s = 0; s < want->size(); ++s)
      EXPECT_NEAR((*got)[s], (*want)[s], 1e-5 * std::abs((*want)[s])) << "loss of step " << s + 1;
    fs::remove_all(out);
  }
}

}  // namespace
}  // namespace dprun
