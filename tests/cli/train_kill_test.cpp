// A kill never loses a checkpoint: `dprun train --checkpoint-every 1` killed with SIGKILL at
// random moments (a seeded generator, so the test repeats), then resumed from the checkpoint
// on disk each time (or started afresh before the first one), ends with the model and the
// checkpoint of the run that was never killed, byte for byte, and no temporary file left.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "cli_test_util.h"
#include "loader/onnx_loader.h"

namespace dprun::testing {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr int64_t kSteps = 30;

// The arguments of a run that saves DIR/out.onnx and its checkpoint every step: from `model`,
// resuming it when `resume`.
std::vector<std::string> train_arguments(const std::string& model, bool resume,
                                         const fs::path& dir) {
  const std::string data = source_path("models/training/mlp_sgd");
  std::vector<std::string> args = {"train",
                                   model,
                                   "--input",
                                   "x=" + data + ".x.npy",
                                   "--target",
                                   data + ".target.npy",
                                   "--loss",
                                   "cross_entropy",
                                   "--optimizer",
                                   "adam",
                                   "--lr",
                                   "0.01",
                                   "--batch",
                                   "4",
                                   "--shuffle",
                                   "--seed",
                                   "5",
                                   "--devices",
                                   "cpu:0",
                                   "--steps",
                                   std::to_string(kSteps),
                                   "--checkpoint-every",
                                   "1",
                                   "--save",
                                   (dir / "out.onnx").string()};
  if (resume) args.push_back("--resume");
  return args;
}

// Starts dprun with `args`, its output to `log`.
pid_t start(const std::vector<std::string>& args, const fs::path& log) {
  std::vector<std::string> all = {DPRUN_BINARY};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, STDOUT_FILENO);
    dup2(fd, STDERR_FILENO);
    execv(argv[0], argv.data());
    _exit(127);
  }
  return pid;
}

// Waits for `pid` until `deadline`, then kills it with SIGKILL. Returns its exit status, or
// 128 + the signal that ended it.
int wait_or_kill(pid_t pid, Clock::time_point deadline) {
  int raw = 0;
  while (waitpid(pid, &raw, WNOHANG) == 0) {
    if (Clock::now() >= deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &raw, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw);
}

// The step of the checkpoint at `path`; -1 when there is none.
int64_t checkpoint_step(const fs::path& path) {
  if (!fs::exists(path)) return -1;
  return load_graph(path.string())->initializers.at("dprun.state.step").data<int64_t>()[0];
}

std::set<std::string> files_in(const fs::path& dir) {
  std::set<std::string> files;
  for (const auto& entry : fs::directory_iterator(dir))
    files.insert(entry.path().filename().string());
  return files;
}

// What one lane of kills did; `error` is empty when every round ended as the whole run.
struct Lane {
  int kills = 0, rounds = 0;
  int mid_save = 0;  // kills that left a save's temporary file behind
  std::string error;
};

struct Reference {
  std::string model, checkpoint;   // the uninterrupted run's files
  std::chrono::microseconds time;  // its wall time
};

// Runs the training in `dir` again and again, each process killed after a random delay of up
// to one whole run's time (or ending first), resuming from the checkpoint on disk, until the
// run completes; then compares its files with `want`. Repeats until `kills` kills.
Lane kill_and_resume(const fs::path& dir, const Reference& want, uint32_t seed, int kills) {
  const std::string model = source_path("models/training/mlp_sgd.onnx");
  std::mt19937 rng(seed);
  // Kills come within one whole run's time; on cores busy with other work a start can take
  // longer than that, so after 20 attempts that saved nothing the window doubles (a resumed run
  // must be able to reach its next checkpoint for the run to complete).
  int64_t window_us = want.time.count();
  const fs::path checkpoint = dir / "out.ckpt.onnx", log = dir.string() + ".log";
  Lane lane;
  while (lane.kills < kills && lane.error.empty()) {
    ++lane.rounds;
    fs::remove_all(dir);
    fs::create_directories(dir);
    int64_t last_step = -1;
    for (int attempt = 0, without_progress = 0;; ++attempt) {
      if (attempt == 500) return lane.error = "the run never completed", lane;
      const int64_t step = checkpoint_step(checkpoint);
      if (step == kSteps) break;  // killed after its last save: nothing left to run
      without_progress = step == last_step ? without_progress + 1 : 0;
      last_step = step;
      if (without_progress == 20) window_us *= 2, without_progress = 0;
      std::uniform_int_distribution<int64_t> delay_us(0, window_us);
      const bool resume = step >= 0;
      const pid_t pid =
          start(train_arguments(resume ? checkpoint.string() : model, resume, dir), log);
      const int status = wait_or_kill(pid, Clock::now() + std::chrono::microseconds(delay_us(rng)));
      if (status == 0) break;
      if (status != 128 + SIGKILL)
        return lane.error = "exit " + std::to_string(status) + ": " + read_text(log), lane;
      ++lane.kills;
      for (const std::string& name : files_in(dir))
        if (name[0] == '.') {
          ++lane.mid_save;
          break;
        }
    }
    const std::string round = "round " + std::to_string(lane.rounds) + ": ";
    if (read_text(dir / "out.onnx") != want.model) lane.error = round + "out.onnx differs";
    if (read_text(checkpoint) != want.checkpoint) lane.error = round + "the checkpoint differs";
    // Only the last run's temporaries could remain, and it removed the killed runs' first.
    if (files_in(dir) != std::set<std::string>{"out.ckpt.onnx", "out.onnx"})
      lane.error = round + "other files are left in the folder";
  }
  return lane;
}

TEST(TrainKill, KilledAtRandomMomentsAndResumedTheRunEndsAsTheUninterruptedOne) {
  const fs::path root = scratch_path("dprun_train_kill");
  fs::remove_all(root);
  fs::create_directories(root / "whole");
  const auto begin = Clock::now();
  const int status = wait_or_kill(
      start(train_arguments(source_path("models/training/mlp_sgd.onnx"), false, root / "whole"),
            root / "whole.log"),
      Clock::time_point::max());
  ASSERT_EQ(status, 0) << read_text(root / "whole.log");
  const Reference want{read_text(root / "whole" / "out.onnx"),
                       read_text(root / "whole" / "out.ckpt.onnx"),
                       std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - begin)};
  ASSERT_FALSE(want.checkpoint.empty());

  // Two lanes at once (each process spends much of its start waiting on the loader).
  constexpr int kLanes = 2, kKillsPerLane = 25;
  std::vector<Lane> lanes(kLanes);
  std::vector<std::thread> threads;
  for (int i = 0; i < kLanes; ++i)
    threads.emplace_back([&, i] {
      lanes[static_cast<size_t>(i)] =
          kill_and_resume(root / ("lane" + std::to_string(i)), want,
                          20261129u + static_cast<uint32_t>(i), kKillsPerLane);
    });
  for (auto& t : threads) t.join();
  int kills = 0, rounds = 0, mid_save = 0;
  for (const Lane& lane : lanes) {
    EXPECT_EQ(lane.error, "");
    kills += lane.kills;
    rounds += lane.rounds;
    mid_save += lane.mid_save;
  }
  EXPECT_GE(kills, 50);
  std::printf(
      "%d kills (%d in the middle of a save) over %d completed runs; a whole run took "
      "%.0f ms\n",
      kills, mid_save, rounds, static_cast<double>(want.time.count()) / 1000);
  fs::remove_all(root);
}

}  // namespace
}  // namespace dprun::testing
