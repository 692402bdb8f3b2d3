// `mpirun -np N dprun train ... --distributed` against one process on the same global batches:
// the deterministic mode bit for bit, the default mode within a stated tolerance; what the
// JSON reports; and faults: a bad input on one rank, a missing file on one rank, a killed rank.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>
#include <tuple>

#include "accelerator_test_util.h"
#include "engine/training/distributed_data_parallel.h"
#include "loader/npy.h"
#include "loader/onnx_loader.h"
#include "mpi_test_util.h"

namespace dprun {
namespace {

namespace fs = std::filesystem;
using testing::mpirun;
using testing::processes_of_rank;
using testing::read_json;
using testing::read_text;
using testing::run_dprun;
using testing::run_ranks;
using testing::scratch;
using testing::source_path;

// Default mode against one process on one device: the ranks sum their shards' gradients, where
// one device sums all rows in one product, so float32 rounding differs. Measured on the MLP
// cases: at most 4% of this tolerance.
constexpr double kRelative = 1e-5, kAbsolute = 1e-7;

// A reference case's arguments, with the data paths made absolute and --devices removed.
struct CaseArgs {
  std::vector<std::pair<std::string, std::string>> inputs;  // name, path
  std::string target;
  std::string rest;  // every other argument
  int64_t batch = 0;
};

CaseArgs case_args(const std::string& name) {
  std::istringstream in(read_text(source_path("models/training/" + name + ".args")));
  CaseArgs args;
  std::vector<std::string> tokens;
  for (std::string t; in >> t;) tokens.push_back(t);
  for (size_t i = 0; i < tokens.size(); ++i) {
    const std::string& t = tokens[i];
    const std::string& value = i + 1 < tokens.size() ? tokens[i + 1] : t;
    if (t == "--devices") {
      ++i;
    } else if (t == "--input") {
      size_t eq = value.find('=');
      args.inputs.push_back({value.substr(0, eq), source_path(value.substr(eq + 1))});
      ++i;
    } else if (t == "--target") {
      args.target = source_path(value);
      ++i;
    } else {
      if (t == "--batch") args.batch = std::stoll(value);
      args.rest += " " + t;
    }
  }
  return args;
}

std::string data_args(const CaseArgs& args) {
  std::string out;
  for (const auto& [name, path] : args.inputs) out += " --input " + name + "=" + path;
  if (!args.target.empty()) out += " --target " + args.target;
  return out;
}

// `t` with its rows (dim 0) in the order `rows`.
Tensor reorder(const Tensor& t, const std::vector<int64_t>& rows) {
  size_t row_bytes = t.nbytes() / static_cast<size_t>(t.dim(0));
  Tensor out = Tensor::empty(t.shape(), t.dtype());
  for (size_t i = 0; i < rows.size(); ++i)
    std::memcpy(static_cast<char*>(out.raw_data()) + i * row_bytes,
                static_cast<const char*>(t.raw_data()) + static_cast<size_t>(rows[i]) * row_bytes,
                row_bytes);
  return out;
}

// The data reordered so that each batch lists rank 0's shard, then rank 1's, ...: then an even
// split of every batch over N devices gives device r exactly rank r's rows, in order.
CaseArgs shard_ordered(const CaseArgs& args, int ranks, const fs::path& dir) {
  CaseArgs out = args;
  auto reorder_file = [&](const std::string& path, const std::string& name) {
    Tensor t = read_npy(path);
    std::vector<int64_t> rows;
    for (int64_t start = 0; start < t.dim(0); start += args.batch) {
      int64_t n = std::min(args.batch, t.dim(0) - start);
      for (int r = 0; r < ranks; ++r)
        for (int64_t p : shard_positions(n, r, ranks)) rows.push_back(start + p);
    }
    std::string file = (dir / (name + ".npy")).string();
    write_npy(reorder(t, rows), file);
    return file;
  };
  for (auto& [name, path] : out.inputs) path = reorder_file(path, "input_" + name);
  if (!out.target.empty()) out.target = reorder_file(out.target, "target");
  return out;
}

// type:0,type:1,... for n devices of `type` (cpu or sim).
std::string devices(const std::string& type, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += (i ? "," : "") + type + ":" + std::to_string(i);
  return out;
}

// The "losses" list of the --json report at `path` (null, failing the test, when it has none).
nlohmann::json losses_of(const fs::path& path) {
  const nlohmann::json report = read_json(path);
  EXPECT_TRUE(report.contains("losses")) << path.string() << ": " << report;
  return report.contains("losses") ? report.at("losses") : nlohmann::json();
}

struct Case {
  std::string name;
  int ranks;
  std::string device_type = "cpu";  // each rank's device, and the single process's devices
};

void PrintTo(const Case& c, std::ostream* out) {
  *out << c.name << " on " << c.ranks << " ranks of " << c.device_type;
}

class DistributedTrain : public ::testing::TestWithParam<Case> {};

TEST_P(DistributedTrain, DeterministicEqualsOneProcessOverAsManyDevicesBitForBit) {
  const auto [name, ranks, device_type] = GetParam();
  fs::path dir = scratch(name + "_" + std::to_string(ranks) + "_" + device_type);
  CaseArgs args = case_args(name);
  std::string model = source_path("models/training/" + name + ".onnx");
  auto distributed =
      run_ranks(ranks, "train " + model + data_args(args) + args.rest + " --devices " +
                           device_type + ":0 --distributed --deterministic --save " +
                           (dir / "ddp.onnx").string() + " --json " + (dir / "ddp.json").string());
  ASSERT_EQ(distributed.status, 0) << distributed.output;
  CaseArgs ordered = shard_ordered(args, ranks, dir);
  auto single = run_dprun("train " + model + data_args(ordered) + args.rest + " --devices " +
                          devices(device_type, ranks) + " --split-policy even --save " +
                          (dir / "one.onnx").string() + " --json " + (dir / "one.json").string());
  ASSERT_EQ(single.status, 0) << single.output;

  EXPECT_EQ(losses_of(dir / "ddp.json"), losses_of(dir / "one.json"));
  auto got = load_graph((dir / "ddp.onnx").string());
  auto want = load_graph((dir / "one.onnx").string());
  ASSERT_EQ(got->initializers.size(), want->initializers.size());
  for (const auto& [param, w] : want->initializers) {
    const Tensor& g = got->initializers.at(param);
    ASSERT_EQ(g.nbytes(), w.nbytes()) << param;
    EXPECT_EQ(std::memcmp(g.raw_data(), w.raw_data(), w.nbytes()), 0) << param;
  }
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Cases, DistributedTrain,
                         ::testing::Values(Case{"mlp_sgd", 2}, Case{"mlp_sgd", 3},
                                           Case{"mlp_adamw", 2}, Case{"mlp_nesterov_dp3", 4},
                                           Case{"mlp_adamw", 2, "sim"}),
                         [](const auto& info) {
                           return info.param.name + "_" + std::to_string(info.param.ranks) +
                                  "_ranks" + (info.param.device_type == "cpu" ? "" : "_of_sim");
                         });

// Each rank on cpu:0, or on sim:0 (a simulated accelerator: parameters, gradients and
// in-place state in device memory, broadcast and summed through host copies).
class DefaultMode : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

TEST_P(DefaultMode, FourRanksMatchOneDeviceWithinTolerance) {
  const auto& [name, rank_device] = GetParam();
  fs::path dir = scratch("default_" + name + "_" + rank_device.substr(0, 3));
  CaseArgs args = case_args(name);
  std::string model = source_path("models/training/" + name + ".onnx");
  auto distributed =
      run_ranks(4, "train " + model + data_args(args) + args.rest + " --devices " + rank_device +
                       " --distributed --save " + (dir / "ddp.onnx").string());
  ASSERT_EQ(distributed.status, 0) << distributed.output;
  auto single = run_dprun("train " + model + data_args(args) + args.rest +
                          " --devices cpu:0 --save " + (dir / "one.onnx").string());
  ASSERT_EQ(single.status, 0) << single.output;
  auto got = load_graph((dir / "ddp.onnx").string());
  auto want = load_graph((dir / "one.onnx").string());
  for (const auto& [param, w] : want->initializers) {
    const Tensor& g = got->initializers.at(param);
    for (int64_t i = 0; i < w.numel(); ++i) {
      double e = w.item_as_double(i);
      ASSERT_NEAR(g.item_as_double(i), e, kAbsolute + kRelative * std::abs(e))
          << param << "[" << i << "]";
    }
  }
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Cases, DefaultMode,
                         ::testing::Combine(::testing::Values("mlp_sgd", "mlp_adam"),
                                            ::testing::Values("cpu:0", "sim:0")),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_" +
                                  std::get<1>(info.param).substr(0, 3);
                         });

// With ignored targets each rank weighs its share of the step's counted targets over every
// rank, not of its rows. models/training/gpt_ragged_dp3's first batch (rows counting 6, 5, 4,
// 3, 2, 1, 0, 0 targets) gives 2 ranks 12 and 9 targets (weights 12/21 and 9/21, where rows
// give 1/2 each) and 3 ranks 9, 7 and 5: the runs give PyTorch's losses and trained model, as
// one process does (tests/cli/train_references_test.cpp: 1e-4 relative, 1e-6 absolute).
// Batches of 4 accumulated in pairs (one all-reduce of one count per step) train as one
// process on batches of 8 within float rounding: 1e-6 relative, 1e-7 absolute.
TEST(DistributedTrainIgnoredTargets, RanksWeighTheStepsCountedTargetsAsOneProcessDoes) {
  const std::string name = "gpt_ragged_dp3";
  fs::path dir = scratch("ignored");
  CaseArgs args = case_args(name);
  ASSERT_NE(args.rest.find(" --batch 8 "), std::string::npos) << args.rest;
  const std::string model = source_path("models/training/" + name + ".onnx");
  auto train = [&](int ranks, const std::string& rest, const std::string& out) {
    const std::string command = "train " + model + data_args(args) + rest + " --save " +
                                (dir / (out + ".onnx")).string() + " --json " +
                                (dir / (out + ".json")).string();
    auto r = ranks > 0 ? run_ranks(ranks, command + " --devices cpu:0 --distributed")
                       : run_dprun(command + " --devices cpu:0");
    EXPECT_EQ(r.status, 0) << r.output;
    return std::pair{testing::numbers(read_json(dir / (out + ".json")), "losses")
                         .value_or(std::vector<double>{}),
                     load_graph((dir / (out + ".onnx")).string())};
  };
  auto expect_near = [](const auto& got, const auto& want, double relative, double absolute) {
    ASSERT_EQ(got.first.size(), want.first.size());
    for (size_t s = 0; s < want.first.size(); ++s)
      EXPECT_NEAR(got.first[s], want.first[s], absolute + relative * std::abs(want.first[s]))
          << "loss of step " << s + 1;
    ASSERT_EQ(got.second->initializers.size(), want.second->initializers.size());
    for (const auto& [param, w] : want.second->initializers) {
      const Tensor& g = got.second->initializers.at(param);
      ASSERT_EQ(g.shape(), w.shape()) << param;
      for (int64_t i = 0; i < w.numel(); ++i)
        ASSERT_NEAR(g.item_as_double(i), w.item_as_double(i),
                    absolute + relative * std::abs(w.item_as_double(i)))
            << param << "[" << i << "]";
    }
  };
  Tensor losses = read_npy(source_path("models/training/" + name + ".losses.npy"));
  std::vector<double> reference_losses;
  for (int64_t s = 0; s < losses.numel(); ++s) reference_losses.push_back(losses.item_as_double(s));
  const auto reference = std::pair{
      reference_losses, load_graph(source_path("models/training/" + name + ".trained.onnx"))};
  for (int ranks : {2, 3}) {
    SCOPED_TRACE(std::to_string(ranks) + " ranks");
    expect_near(train(ranks, args.rest, "ddp"), reference, 1e-4, 1e-6);
  }
  const std::string accumulated =
      std::regex_replace(args.rest, std::regex(" --batch 8 "), " --batch 4 --accumulate 2 ");
  const auto whole = train(0, args.rest, "one");
  SCOPED_TRACE("--accumulate 2 on 2 ranks");
  expect_near(train(2, accumulated, "accumulated"), whole, 1e-6, 1e-7);
  fs::remove_all(dir);
}

std::string mlp_args(const fs::path& dir) {
  return "train " + source_path("models/training/mlp_sgd.onnx") + " --target " +
         source_path("models/training/mlp_sgd.target.npy") +
         " --loss cross_entropy --optimizer sgd --lr 0.1 --batch 10 --no-shuffle --devices cpu:0"
         " --distributed --save " +
         (dir / "out.onnx").string();
}

std::string mlp_x() {
  return " --input x=" + source_path("models/training/mlp_sgd.x.npy");
}

TEST(DistributedTrainReport, OnlyRankZeroPrintsAndItsJsonDescribesTheRanks) {
  fs::path dir = scratch("report");
  auto r =
      run_ranks(2, mlp_args(dir) + mlp_x() + " --steps 4 --json " + (dir / "run.json").string());
  ASSERT_EQ(r.status, 0) << r.output;
  size_t finals = 0;
  for (size_t at = r.output.find("last batch loss"); at != std::string::npos;
       at = r.output.find("last batch loss", at + 1))
    ++finals;
  EXPECT_EQ(finals, 1u) << r.output;
  EXPECT_NE(r.output.find("distributed over 2 ranks (mpi): each step, rank r takes rows r, r+2, "
                          "... of the batch; 1 gradient bucket, MPI's reduction"),
            std::string::npos)
      << r.output;
  const nlohmann::json report = read_json(dir / "run.json");
  const nlohmann::json& ranks = report.at("ranks");
  // Batches of 10, 10, 5 and 10 rows: rank 0 takes 5 + 5 + 3 + 5 rows, rank 1 5 + 5 + 2 + 5.
  // 293 float32 parameters: 1172 bytes all-reduced per step, 4688 over the 4 steps.
  EXPECT_EQ(ranks.at("world_size"), 2) << report;
  EXPECT_EQ(ranks.at("backend"), "mpi") << report;
  EXPECT_EQ(ranks.at("deterministic"), false) << report;
  EXPECT_EQ(ranks.at("overlaps_backward"), true) << report;
  EXPECT_EQ(ranks.at("buckets"), 1) << report;
  EXPECT_EQ(ranks.at("rows"), nlohmann::json({18, 17})) << report;
  EXPECT_EQ(ranks.at("allreduce_bytes"), nlohmann::json({4688, 4688})) << report;
  const std::vector<double> rates =
      testing::numbers(ranks, "samples_per_s").value_or(std::vector<double>{});
  ASSERT_EQ(rates.size(), 2u) << report;
  for (double rate : rates) EXPECT_GE(rate, 0) << report;
  fs::remove_all(dir);
}

// --gradient-compression: the ranks' gradients travel in 16 bits, half the bytes of the float32
// run, and training follows the float32 run within what the rounding of the gradients allows
// (measured over these 4 steps: bfloat16 2.3e-5 of the losses and 9.5e-5 of the parameters,
// float16 1.4e-6 and 9.2e-6; the bounds are ten times that) but not bit for bit.
TEST(DistributedTrainReport, CompressedGradientsHalveTheBytesAndTrainNearFloat32) {
  fs::path dir = scratch("compression");
  auto full =
      run_ranks(2, mlp_args(dir) + mlp_x() + " --steps 4 --json " + (dir / "full.json").string());
  ASSERT_EQ(full.status, 0) << full.output;
  auto want = load_graph((dir / "out.onnx").string());
  const std::vector<double> want_losses =
      testing::numbers(read_json(dir / "full.json"), "losses").value_or(std::vector<double>{});
  ASSERT_EQ(want_losses.size(), 4u);
  for (const auto& [flag, name, bound] :
       {std::tuple{"bf16", "bfloat16", 1e-3}, std::tuple{"fp16", "float16", 1e-4}}) {
    SCOPED_TRACE(flag);
    auto r = run_ranks(2, mlp_args(dir) + mlp_x() + " --steps 4 --gradient-compression " + flag +
                              " --json " + (dir / "run.json").string());
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_NE(r.output.find("1 gradient bucket, MPI's reduction, in " + std::string(name) + "\n"),
              std::string::npos)
        << r.output;
    const nlohmann::json report = read_json(dir / "run.json");
    // 293 parameters: 586 bytes a step in 16 bits (2344 over 4 steps), against 1172 in float32.
    EXPECT_EQ(report.at("ranks").at("gradient_compression"), name) << report;
    EXPECT_EQ(report.at("ranks").at("allreduce_bytes"), nlohmann::json({2344, 2344})) << report;
    const std::vector<double> losses =
        testing::numbers(report, "losses").value_or(std::vector<double>{});
    ASSERT_EQ(losses.size(), 4u);
    for (size_t s = 0; s < 4; ++s)
      EXPECT_NEAR(losses[s], want_losses[s], bound * want_losses[s]) << "step " << s + 1;
    auto got = load_graph((dir / "out.onnx").string());
    double largest = 0;
    for (const auto& [param, w] : want->initializers)
      for (int64_t i = 0; i < w.numel(); ++i) {
        const double d = got->initializers.at(param).item_as_double(i) - w.item_as_double(i);
        ASSERT_LE(std::abs(d), bound * (1 + std::abs(w.item_as_double(i))))
            << param << "[" << i << "]";
        largest = std::max(largest, std::abs(d));
      }
    EXPECT_GT(largest, 0) << "the rounded gradients changed nothing";
  }
  auto bad = run_ranks(2, mlp_args(dir) + mlp_x() + " --steps 1 --gradient-compression int8");
  EXPECT_EQ(bad.status, 2) << bad.output;
  EXPECT_NE(bad.output.find("--gradient-compression must be bf16, fp16 or none, got 'int8'"),
            std::string::npos)
      << bad.output;
  fs::remove_all(dir);
}

TEST(DistributedTrainFaults, BadInputOnOneRankStopsEveryRankCleanly) {
  // mpirun's MPMD form gives rank 1 a data file with 13 features where the model takes 12.
  fs::path dir = scratch("bad_input");
  write_npy(Tensor::zeros({25, 13}, DType::Float32), (dir / "wide.npy").string());
  std::string common = mlp_args(dir) + " --steps 3";
  std::string command = mpirun(1) + " " + DPRUN_BINARY + " " + common + mlp_x() + " : -n 1 " +
                        DPRUN_BINARY + " " + common + " --input x=" + (dir / "wide.npy").string();
  auto r = testing::run_command(command, 120);
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("dprun: error: rank 1: step 1: 1 of 1 replica failed: replica 0 on "
                          "cpu:0: input 'x' expects shape [batch, 12] but got [5, 13]\n"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("MPI_ABORT"), std::string::npos) << r.output;  // a clean stop
  EXPECT_FALSE(fs::exists(dir / "out.onnx"));
  EXPECT_FALSE(fs::exists(dir / "out.onnx.tmp"));
  fs::remove_all(dir);
}

TEST(DistributedTrainFaults, MissingFileOnOneRankEndsTheJob) {
  fs::path dir = scratch("missing");
  std::string common = mlp_args(dir) + " --steps 3";
  std::string missing = (dir / "absent.npy").string();
  std::string command = mpirun(1) + " " + DPRUN_BINARY + " " + common + mlp_x() + " : -n 1 " +
                        DPRUN_BINARY + " " + common + " --input x=" + missing;
  auto start = std::chrono::steady_clock::now();
  auto r = testing::run_command(command, 120);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("dprun: error: rank 1: " + missing + ": file not found\n"),
            std::string::npos)
      << r.output;
  EXPECT_LT(seconds, 60);
  EXPECT_FALSE(fs::exists(dir / "out.onnx"));
  fs::remove_all(dir);
}

TEST(DistributedTrainFaults, KilledRankEndsTheJobWithoutHanging) {
  fs::path dir = scratch("killed");
  std::string marker = "DPRUN_TEST_JOB=killed_" + std::to_string(getpid());
  fs::path log = dir / "log.txt";
  std::string command = "exec env " + marker + " " + mpirun(2) + " " + DPRUN_BINARY + " " +
                        mlp_args(dir) + mlp_x() + " --steps 100000000 >" + log.string() +
                        " 2>&1 </dev/null";
  pid_t launcher = fork();
  ASSERT_GE(launcher, 0);
  if (launcher == 0) {
    execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  using Clock = std::chrono::steady_clock;
  auto deadline = Clock::now() + std::chrono::seconds(60);
  std::vector<pid_t> rank1;
  int status = 0;
  pid_t done = 0;
  while (Clock::now() < deadline) {  // until training has started on every rank
    if (read_text(log).find("distributed over 2 ranks") != std::string::npos &&
        !(rank1 = processes_of_rank(marker, 1)).empty())
      break;
    if ((done = waitpid(launcher, &status, WNOHANG)) != 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_EQ(done, 0) << "mpirun ended before a rank was killed\n" << read_text(log);
  ASSERT_EQ(rank1.size(), 1u) << read_text(log);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  ASSERT_EQ(kill(rank1[0], SIGKILL), 0);
  auto killed = Clock::now();

  while ((done = waitpid(launcher, &status, WNOHANG)) == 0 &&
         Clock::now() < killed + std::chrono::seconds(60))
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  if (done == 0) {  // still running: stop what this test started, then fail
    for (int r = 0; r < 2; ++r)
      for (pid_t p : processes_of_rank(marker, r)) kill(p, SIGKILL);
    kill(launcher, SIGKILL);
    waitpid(launcher, &status, 0);
    FAIL() << "mpirun did not end within 60 s of a rank being killed\n" << read_text(log);
  }
  double seconds = std::chrono::duration<double>(Clock::now() - killed).count();
  ASSERT_TRUE(WIFEXITED(status)) << read_text(log);
  EXPECT_NE(WEXITSTATUS(status), 0);
  EXPECT_LT(seconds, 30);
  std::string output = read_text(log);
  EXPECT_NE(output.find("process rank 1"), std::string::npos) << output;
  EXPECT_NE(output.find("exited on signal 9 (Killed)"), std::string::npos) << output;
  EXPECT_TRUE(processes_of_rank(marker, 0).empty());  // rank 0 was ended too
  EXPECT_FALSE(fs::exists(dir / "out.onnx"));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace dprun
