// `dprun train --profile`: the time of each op type (forward and backward apart), the slowest
// nodes, each device's node time and the time outside the nodes, over the steps after the
// warm-up; in --json its figures, which must add up: every node of every profiled step counted
// once per replica, each op's time the sum of its nodes', the devices' the sum of all.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "cli_test_util.h"

namespace dprun::testing {
namespace {

namespace fs = std::filesystem;

struct ProfiledRun {
  CommandResult result;
  nlohmann::json report;
};

// mlp_sgd: 25 rows in batches of 10, 4 steps.
ProfiledRun train(const std::string& extra, const std::string& tag) {
  const fs::path dir = scratch_path("dprun_train_profile_" + tag);
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string data = source_path("models/training/mlp_sgd");
  ProfiledRun run;
  run.result = run_dprun("train " + data + ".onnx --input x=" + data + ".x.npy --target " + data +
                         ".target.npy --loss cross_entropy --optimizer sgd --lr 0.1 --batch 10 " +
                         "--steps 4 --no-shuffle --save " + (dir / "out.onnx").string() +
                         " --json " + (dir / "run.json").string() + " " + extra);
  EXPECT_EQ(run.result.status, 0) << run.result.output;
  run.report = read_json(dir / "run.json");
  fs::remove_all(dir);
  return run;
}

// The figures are written to 9 significant digits or more: sums of them agree to 1e-7.
void expect_near(double got, double want) {
  EXPECT_NEAR(got, want, 1e-7 * std::max(1.0, std::abs(want)));
}

// Checks that the profile's figures add up for `steps` profiled steps on `replicas` devices
// (named `devices`), after `warmup` steps of step_seconds.
void expect_consistent_profile(const nlohmann::json& report, int64_t steps, int64_t replicas,
                               const std::vector<std::string>& devices, size_t warmup) {
  ASSERT_TRUE(report.at("profiled").get<bool>());
  const nlohmann::json& p = report.at("profile");
  EXPECT_EQ(p.at("steps").get<int64_t>(), steps);
  // Per op: the calls and milliseconds of its nodes.
  std::map<std::string, double> calls, forward, backward;
  double nodes_ms = 0;
  int backward_nodes = 0;
  for (const nlohmann::json& n : p.at("nodes")) {
    const std::string op = n.at("op"), phase = n.at("phase"), key = n.at("node");
    EXPECT_EQ(n.at("calls").get<int64_t>(), steps * replicas) << key;
    EXPECT_EQ(phase, key.rfind("grad/", 0) == 0 ? "backward" : "forward") << key;
    backward_nodes += phase == "backward";
    calls[op] += static_cast<double>(n.at("calls").get<int64_t>()) / static_cast<double>(steps);
    (phase == "backward" ? backward : forward)[op] += n.at("ms_per_step").get<double>();
    nodes_ms += n.at("ms_per_step").get<double>();
  }
  EXPECT_GT(backward_nodes, 0);
  EXPECT_EQ(p.at("ops").size(), calls.size());
  for (const nlohmann::json& o : p.at("ops")) {
    const std::string op = o.at("op");
    EXPECT_EQ(o.at("calls_per_step").get<double>(), calls[op]) << op;
    expect_near(o.at("forward_ms").get<double>(), forward[op]);
    expect_near(o.at("backward_ms").get<double>(), backward[op]);
  }
  expect_near(p.at("nodes_ms").get<double>(), nodes_ms);
  double devices_ms = 0, busiest_ms = 0;
  ASSERT_EQ(p.at("devices").size(), devices.size()) << p.at("devices");
  for (const std::string& d : devices) {
    devices_ms += p.at("devices").at(d).get<double>();
    busiest_ms = std::max(busiest_ms, p.at("devices").at(d).get<double>());
  }
  expect_near(devices_ms, nodes_ms);
  // The step's time is the profiled steps' mean; the nodes run inside it.
  const std::vector<double> seconds = report.at("step_seconds").get<std::vector<double>>();
  double profiled = 0;
  for (size_t k = warmup; k < seconds.size(); ++k) profiled += seconds[k];
  expect_near(p.at("step_ms").get<double>(), profiled * 1e3 / static_cast<double>(steps));
  EXPECT_LT(nodes_ms / static_cast<double>(replicas), p.at("step_ms").get<double>());
  expect_near(p.at("outside_ms").get<double>(), p.at("step_ms").get<double>() - busiest_ms);
  EXPECT_GT(p.at("outside_ms").get<double>(), 0.0);
  EXPECT_GT(p.at("profiler_ms").get<double>(), 0.0);
}

TEST(TrainProfileCli, ProfilesTheStepsAfterTheWarmUp) {
  const ProfiledRun run = train("--devices cpu:0 --profile", "one");
  expect_consistent_profile(run.report, 3, 1, {"cpu:0"}, 1);
  const std::string& out = run.result.output;
  EXPECT_NE(out.find("samples/s (profiled) after 1 warm-up step"), std::string::npos) << out;
  EXPECT_NE(out.find("profile of the 3 steps after the warm-up (ms per step"), std::string::npos)
      << out;
  EXPECT_NE(out.find("slowest nodes (ms per step, phase, op, first output: input shapes)"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("\ncpu:0      nodes "), std::string::npos) << out;
  EXPECT_NE(out.find("outside the busiest device's nodes (update, batches, executor)"),
            std::string::npos)
      << out;
}

TEST(TrainProfileCli, EveryReplicaIsCounted) {
  const ProfiledRun run = train("--devices cpu:0,cpu:1 --warmup-steps 2 --profile", "two");
  expect_consistent_profile(run.report, 2, 2, {"cpu:0", "cpu:1"}, 2);
}

TEST(TrainProfileCli, AllStepsWhenNoneAreLeftAfterTheWarmUp) {
  // As samples/s: a run of no more steps than --warmup-steps reports them all.
  const ProfiledRun run = train("--devices cpu:0 --warmup-steps 4 --profile", "all");
  expect_consistent_profile(run.report, 4, 1, {"cpu:0"}, 0);
}

TEST(TrainProfileCli, WithoutTheFlagNothingIsProfiled) {
  const ProfiledRun run = train("--devices cpu:0", "none");
  EXPECT_FALSE(run.report.at("profiled").get<bool>());
  EXPECT_FALSE(run.report.contains("profile"));
  EXPECT_EQ(run.result.output.find("profiled"), std::string::npos) << run.result.output;
  EXPECT_EQ(run.result.output.find("slowest nodes"), std::string::npos) << run.result.output;
}

// The run's memory as the process's peak resident memory over its own before the model was
// loaded: at least the tensors the devices' allocators held at their peak, and far from the
// libraries already resident at the start (the CUDA libraries alone are over 200 MB).
TEST(TrainMemoryCli, JsonReportsThePeakResidentMemoryOverTheStart) {
  const ProfiledRun run = train("--devices cpu:0,cpu:1", "memory");
  const int64_t resident = run.report.at("peak_resident_bytes").get<int64_t>();
  int64_t tensors = 0;
  for (const nlohmann::json& peak : run.report.at("peak_bytes")) tensors += peak.get<int64_t>();
  EXPECT_GT(tensors, 0) << run.report;
  EXPECT_GE(resident, tensors) << run.report;
  EXPECT_LT(resident, int64_t{128} << 20) << run.report;
}

}  // namespace
}  // namespace dprun::testing
