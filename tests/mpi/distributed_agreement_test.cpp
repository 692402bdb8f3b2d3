// Ranks given different options, models or data stop before the first step with one line from
// rank 0 and a non-zero exit on every rank; a rank that stops (SIGSTOP) is named by the ranks
// that waited for it; a rank stopped before it joins the job does not hang the others.
// mpirun's MPMD form (`A : -n 1 B`) gives rank 1 its own command line; each rank runs under a
// small script that records its exit status.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <regex>
#include <thread>

#include "loader/npy.h"
#include "loader/onnx_loader.h"
#include "mpi_test_util.h"

namespace dprun {
namespace {

namespace fs = std::filesystem;
using testing::mpirun;
using testing::processes_of_rank;
using testing::read_text;
using testing::scratch;
using testing::source_path;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// A script that runs its arguments and writes their exit status to DIR/status.RANK.
std::string status_recorder(const fs::path& dir) {
  const fs::path script = dir / "record_status.sh";
  std::ofstream(script) << "#!/bin/sh\n\"$@\"\nstatus=$?\necho $status > " << dir.string()
                        << "/status.$OMPI_COMM_WORLD_RANK\nexit $status\n";
  fs::permissions(script, fs::perms::owner_all);
  return script.string();
}

// Rank 0 runs dprun with `rank0`, rank 1 with `rank1`, each under status_recorder. Open MPI's
// mpirun ends the job when a rank exits non-zero, killing the rank that was still stopping on
// its own (SIGTERM, status 143): each rank's own exit is what these tests check, so mpirun is
// told to wait for both (other MPI implementations ignore the variable), and the result's
// status is the job's as mpirun would give it, the ranks' highest.
testing::CommandResult run_two(const fs::path& dir, const std::string& rank0,
                               const std::string& rank1) {
  const std::string dprun = status_recorder(dir) + " " + DPRUN_BINARY + " ";
  testing::CommandResult r =
      testing::run_command("env OMPI_MCA_orte_abort_on_non_zero_status=0 " + mpirun(1) + " " +
                               dprun + rank0 + " : -n 1 " + dprun + rank1,
                           60);
  for (int rank : {0, 1}) {
    const std::string status = read_text(dir / ("status." + std::to_string(rank)));
    if (!status.empty()) r.status = std::max(r.status, std::stoi(status));
  }
  return r;
}

size_t count_of(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

// Both ranks stopped with status 1, and the output holds `message` once, from rank 0, with no
// MPI abort.
void expect_disagreement(const fs::path& dir, const testing::CommandResult& r,
                         const std::string& message) {
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_EQ(count_of(r.output, "dprun: error: " + message + "\n"), 1u) << r.output;
  EXPECT_EQ(count_of(r.output, "dprun: error"), 1u) << r.output;
  EXPECT_EQ(r.output.find("MPI_ABORT"), std::string::npos) << r.output;
  for (int rank : {0, 1})
    EXPECT_EQ(read_text(dir / ("status." + std::to_string(rank))), "1\n") << "rank " << rank;
  EXPECT_FALSE(fs::exists(dir / "out.onnx"));
}

// `dprun train` of models/training/mlp_sgd (25 rows of 12 features, 5 classes) on cpu:0,
// without the options the cases vary.
std::string train_args(const fs::path& dir, const std::string& model, const std::string& x,
                       const std::string& target, int64_t steps = 2) {
  return "train " + model + " --input x=" + x + " --target " + target +
         " --loss cross_entropy --no-shuffle --steps " + std::to_string(steps) +
         " --devices cpu:0 --distributed --save " + (dir / "out.onnx").string();
}

std::string mlp_train_args(const fs::path& dir, int64_t steps = 2) {
  return train_args(dir, source_path("models/training/mlp_sgd.onnx"),
                    source_path("models/training/mlp_sgd.x.npy"),
                    source_path("models/training/mlp_sgd.target.npy"), steps);
}

struct OptionCase {
  std::string name;
  std::string rank0, rank1;  // each rank's options beyond mlp_train_args
  std::string message;
};

void PrintTo(const OptionCase& c, std::ostream* out) {
  *out << c.name;
}

class RanksDisagreeOnAnOption : public ::testing::TestWithParam<OptionCase> {};

TEST_P(RanksDisagreeOnAnOption, EveryRankStopsBeforeTheFirstStep) {
  const OptionCase& c = GetParam();
  const fs::path dir = scratch("disagree_" + c.name);
  const std::string common = mlp_train_args(dir);
  expect_disagreement(dir, run_two(dir, common + c.rank0, common + c.rank1), c.message);
  fs::remove_all(dir);
}

const std::string kSgd = " --optimizer sgd --lr 0.1 --batch 10";

INSTANTIATE_TEST_SUITE_P(
    Options, RanksDisagreeOnAnOption,
    ::testing::Values(
        OptionCase{"batch", " --optimizer sgd --lr 0.1 --batch 10",
                   " --optimizer sgd --lr 0.1 --batch 4",
                   "ranks disagree on --batch: rank 0 has 10, rank 1 has 4"},
        OptionCase{"accumulate", kSgd, kSgd + " --accumulate 2",
                   "ranks disagree on --accumulate: rank 0 has none, rank 1 has 2"},
        OptionCase{"seed", kSgd + " --seed 1", kSgd + " --seed 2",
                   "ranks disagree on --seed: rank 0 has 1, rank 1 has 2"},
        OptionCase{"deterministic", kSgd + " --deterministic", kSgd,
                   "ranks disagree on --deterministic: rank 0 has it, rank 1 has not"},
        OptionCase{"gradient_compression", kSgd, kSgd + " --gradient-compression bf16",
                   "ranks disagree on --gradient-compression: rank 0 has none, rank 1 has bf16"},
        OptionCase{"bucket_mb", kSgd + " --bucket-mb 1", kSgd + " --bucket-mb 0.001",
                   "ranks disagree on --bucket-mb: rank 0 has 1, rank 1 has 0.001"},
        OptionCase{"lr", " --optimizer sgd --lr 0.1 --batch 10",
                   " --optimizer sgd --lr 0.2 --batch 10",
                   "ranks disagree on --lr: rank 0 has 0.1, rank 1 has 0.2"},
        OptionCase{"optimizer", " --optimizer sgd --lr 0.1 --batch 10",
                   " --optimizer adam --lr 0.1 --batch 10",
                   "ranks disagree on --optimizer: rank 0 has sgd, rank 1 has adam"},
        OptionCase{"precision", kSgd, kSgd + " --precision bfloat16",
                   "ranks disagree on --precision: rank 0 has none, rank 1 has bfloat16"}),
    [](const auto& info) { return info.param.name; });

// Spellings of one value agree, and per-rank options (threads, devices' layout, file paths)
// may differ: the run trains.
TEST(RanksAgree, SpellingsOfOneValueAndPerRankOptionsMayDiffer) {
  const fs::path dir = scratch("agree");
  fs::copy_file(source_path("models/training/mlp_sgd.x.npy"), dir / "x_copy.npy");
  const std::string copy =
      train_args(dir, source_path("models/training/mlp_sgd.onnx"), (dir / "x_copy.npy").string(),
                 source_path("models/training/mlp_sgd.target.npy"));
  auto r = run_two(dir, mlp_train_args(dir) + " --optimizer sgd --batch 10 --lr 0.1 --threads 2",
                   copy + " --optimizer sgd --batch 10 --lr 0.10 --threads 1 --split-policy even");
  EXPECT_EQ(r.status, 0) << r.output;
  for (int rank : {0, 1})
    EXPECT_EQ(read_text(dir / ("status." + std::to_string(rank))), "0\n") << "rank " << rank;
  EXPECT_TRUE(fs::exists(dir / "out.onnx"));
  fs::remove_all(dir);
}

// mlp_sgd with a hidden layer of 8 instead of 16: every dim of 16 of its parameters halved.
std::string narrower_mlp(const fs::path& dir) {
  auto graph = load_graph(source_path("models/training/mlp_sgd.onnx"));
  std::map<std::string, Tensor> parameters;
  for (const auto& [name, t] : graph->initializers) {
    Shape shape = t.shape();
    for (int64_t& d : shape)
      if (d == 16) d = 8;
    parameters[name] = Tensor::zeros(shape, t.dtype());
  }
  graph->value_types.clear();
  const std::string path = (dir / "narrow.onnx").string();
  save_graph(*graph, parameters, path);
  return path;
}

TEST(RanksDisagreeOnTheModel, AParameterOfAnotherShapeIsNamed) {
  const fs::path dir = scratch("disagree_model");
  const auto& x = source_path("models/training/mlp_sgd.x.npy");
  const auto& target = source_path("models/training/mlp_sgd.target.npy");
  auto r = run_two(dir, mlp_train_args(dir) + kSgd,
                   train_args(dir, narrower_mlp(dir), x, target) + kSgd);
  expect_disagreement(
      dir, r,
      "ranks disagree on the model: parameter 'fc1.bias' is [16] on rank 0 and [8] on rank 1");
  fs::remove_all(dir);
}

TEST(RanksDisagreeOnTheData, TheRowsOfEachRankAreNamed) {
  const fs::path dir = scratch("disagree_rows");
  Tensor x = read_npy(source_path("models/training/mlp_sgd.x.npy"));
  Tensor target = read_npy(source_path("models/training/mlp_sgd.target.npy"));
  write_npy(x.narrow(0, 0, 20), (dir / "x20.npy").string());
  write_npy(target.narrow(0, 0, 20), (dir / "target20.npy").string());
  auto r = run_two(dir, mlp_train_args(dir) + kSgd,
                   train_args(dir, source_path("models/training/mlp_sgd.onnx"),
                              (dir / "x20.npy").string(), (dir / "target20.npy").string()) +
                       kSgd);
  expect_disagreement(dir, r,
                      "ranks disagree on the rows of training data: rank 0 has 25, rank 1 has 20");
  fs::remove_all(dir);
}

TEST(RanksDisagreeToRun, OnTheBatchOfGeneratedInputs) {
  const fs::path dir = scratch("disagree_run");
  const std::string run =
      "run " + source_path("models/training/mlp_sgd.onnx") + " --devices cpu:0 --distributed";
  expect_disagreement(dir, run_two(dir, run + " --batch 8", run + " --batch 6"),
                      "ranks disagree on --batch: rank 0 has 8, rank 1 has 6");
  fs::remove_all(dir);
}

TEST(RanksDisagreeToBench, OnTheShapeOfAnInput) {
  const fs::path dir = scratch("disagree_bench");
  Tensor x = read_npy(source_path("models/training/mlp_sgd.x.npy"));
  write_npy(x.narrow(0, 0, 8), (dir / "x8.npy").string());
  write_npy(x.narrow(0, 0, 6), (dir / "x6.npy").string());
  const std::string bench = "bench " + source_path("models/training/mlp_sgd.onnx") +
                            " --devices cpu:0 --iters 2 --distributed --input x=";
  expect_disagreement(
      dir, run_two(dir, bench + (dir / "x8.npy").string(), bench + (dir / "x6.npy").string()),
      "ranks disagree on the inputs: input 'x' is [8, 12] on rank 0 and [6, 12] on rank 1");
  fs::remove_all(dir);
}

// A job started in the background, its output in a log, ended by the test if still running.
class BackgroundJob {
 public:
  BackgroundJob(const std::string& command, const fs::path& log, std::string marker, int ranks)
      : marker_(std::move(marker)), ranks_(ranks) {
    const std::string line =
        "exec env " + marker_ + " " + command + " >" + log.string() + " 2>&1 </dev/null";
    pid_ = fork();
    if (pid_ == 0) {
      execl("/bin/sh", "sh", "-c", line.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
  }
  ~BackgroundJob() {
    if (running()) kill_all();
  }

  bool running() {
    if (pid_ <= 0 || done_) return false;
    done_ = waitpid(pid_, &status_, WNOHANG) != 0;
    return !done_;
  }
  /// Waits until the job ends or `seconds` pass; true when it ended.
  bool wait(double seconds) {
    const auto start = Clock::now();
    while (running() && seconds_since(start) < seconds)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    return !running();
  }
  int exit_status() const { return WIFEXITED(status_) ? WEXITSTATUS(status_) : -1; }
  void kill_all() {
    for (int r = 0; r < ranks_; ++r)
      for (pid_t p : processes_of_rank(marker_, r)) kill(p, SIGKILL);
    if (pid_ > 0 && !done_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, &status_, 0);
      done_ = true;
    }
  }

 private:
  std::string marker_;
  int ranks_;
  pid_t pid_ = -1;
  bool done_ = false;
  int status_ = 0;
};

// Three ranks train with --timeout 15; rank 1 is stopped mid-training. Ranks 0 and 2 name it
// (whichever times out first ends the job), within the timeout and the 2 s they wait for
// answers. Rank 1 is resumed once named: it blames nobody. The timeout bounds the start-up too,
// and three ranks starting on 2 busy cores (ctest -j2 beside other builds) have taken more than
// 5 s to pass MPI_Init: 15 s keeps the start out of what this test measures.
TEST(DistributedTimeouts, TheRanksThatWaitedNameTheStoppedRank) {
  constexpr int kTimeout = 15;
  const fs::path dir = scratch("stopped");
  const std::string marker = "DPRUN_TEST_JOB=stopped_" + std::to_string(getpid());
  const fs::path log = dir / "log.txt";
  BackgroundJob job(mpirun(3) + " " + DPRUN_BINARY + " " + mlp_train_args(dir, 100000000) + kSgd +
                        " --timeout " + std::to_string(kTimeout),
                    log, marker, 3);
  std::vector<pid_t> rank1;
  const auto started = Clock::now();
  while (seconds_since(started) < 60 && job.running()) {  // until every rank trains
    if (read_text(log).find("distributed over 3 ranks") != std::string::npos &&
        (rank1 = processes_of_rank(marker, 1)).size() == 1)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(job.running()) << read_text(log);
  ASSERT_EQ(rank1.size(), 1u) << read_text(log);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ASSERT_EQ(kill(rank1[0], SIGSTOP), 0);
  const auto stopped = Clock::now();
  while (job.running() && seconds_since(stopped) < 30 &&
         read_text(log).find("did not join") == std::string::npos)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const double named_after = seconds_since(stopped);
  kill(rank1[0], SIGCONT);
  const bool ended = job.wait(30);
  const std::string output = read_text(log);
  if (!ended) job.kill_all();
  ASSERT_TRUE(ended) << "the job did not end within 30 s of rank 1 being named\n" << output;
  EXPECT_NE(job.exit_status(), 0) << output;
  EXPECT_GE(named_after, kTimeout) << output;
  EXPECT_LT(named_after, kTimeout + 2.0 + 5.0) << output;  // the timeout, the answers, slack
  EXPECT_TRUE(std::regex_search(
      output, std::regex("dprun: error: rank [02]: rank 1 did not join the "
                         "(all-reduce|all-gather|broadcast) of step [0-9]+ within 15 s\n")))
      << output;
  for (const char* wrong : {"rank 0 did not join", "rank 2 did not join", "ranks 0",
                            "other ranks did not join", "ranks 1, 2", "rank 1: rank"})
    EXPECT_EQ(output.find(wrong), std::string::npos) << wrong << " in\n" << output;
  for (int r = 0; r < 3; ++r) EXPECT_TRUE(processes_of_rank(marker, r).empty()) << "rank " << r;
  fs::remove_all(dir);
}

// Rank 1 stops itself before dprun starts, so MPI_Init waits for it on rank 0: rank 0 gives
// up after --timeout 3 and says so; the job ends with a non-zero status.
TEST(DistributedTimeouts, ARankThatNeverJoinsDoesNotHangTheOthers) {
  const fs::path dir = scratch("never_joins");
  const std::string marker = "DPRUN_TEST_JOB=never_joins_" + std::to_string(getpid());
  const fs::path script = dir / "stop_rank_1.sh";
  std::ofstream(script) << "#!/bin/sh\n[ \"$OMPI_COMM_WORLD_RANK\" = 1 ] && kill -STOP $$\n"
                           "exec \"$@\"\n";
  fs::permissions(script, fs::perms::owner_all);
  const fs::path log = dir / "log.txt";
  const auto start = Clock::now();
  BackgroundJob job(mpirun(2) + " " + script.string() + " " + DPRUN_BINARY + " " +
                        mlp_train_args(dir) + kSgd + " --timeout 3",
                    log, marker, 2);
  const bool ended = job.wait(30);
  const double seconds = seconds_since(start);
  const std::string output = read_text(log);
  if (!ended) job.kill_all();
  ASSERT_TRUE(ended) << "the job did not end within 30 s\n" << output;
  EXPECT_NE(job.exit_status(), 0) << output;
  EXPECT_GE(seconds, 3.0);
  EXPECT_LT(seconds, 15.0);
  EXPECT_NE(output.find("dprun: error: rank 0: the job did not start within 3 s: MPI_Init is "
                        "still waiting for some of the 2 ranks to join (stopped or stuck before "
                        "joining; Open MPI does not say which)\n"),
            std::string::npos)
      << output;
  for (int r = 0; r < 2; ++r) EXPECT_TRUE(processes_of_rank(marker, r).empty()) << "rank " << r;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace dprun
