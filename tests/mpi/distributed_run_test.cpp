// `mpirun -np N dprun run|bench ... --distributed`: the batch cut over the ranks, the outputs
// gathered on rank 0 equal to one process's, the bench's per-rank figures and scaling table.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "loader/npy.h"
#include "mpi_test_util.h"

namespace dprun {
namespace {

namespace fs = std::filesystem;
using testing::read_json;
using testing::run_dprun;
using testing::run_ranks;
using testing::scratch;
using testing::source_path;

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

struct RunCase {
  std::string model;
  int ranks;
  int batch;
  std::vector<int> rows;  // the JSON's rows per rank
};

void PrintTo(const RunCase& c, std::ostream* out) {
  *out << c.model << " batch " << c.batch << " on " << c.ranks << " ranks";
}

class DistributedRun : public ::testing::TestWithParam<RunCase> {};

TEST_P(DistributedRun, RankZeroGathersWhatOneProcessComputes) {
  const RunCase c = GetParam();
  fs::path dir = scratch("run_" + c.model);
  std::string common = source_path("models/" + c.model + ".onnx") + " --batch " +
                       std::to_string(c.batch) + " --symbol seq=8 --devices cpu:0";
  auto ranks =
      run_ranks(c.ranks, common + " --distributed --output-dir " + (dir / "ranks").string() +
                             " --json " + (dir / "run.json").string());
  ASSERT_EQ(ranks.status, 0) << ranks.output;
  EXPECT_EQ(count(ranks.output, "time: "), 1u) << ranks.output;  // rank 0 alone prints
  auto one = run_dprun(common + " --output-dir " + (dir / "one").string());
  ASSERT_EQ(one.status, 0) << one.output;
  size_t compared = 0;
  for (const auto& entry : fs::directory_iterator(dir / "one")) {
    Tensor want = read_npy(entry.path().string());
    Tensor got = read_npy((dir / "ranks" / entry.path().filename()).string());
    ASSERT_EQ(got.shape(), want.shape()) << entry.path();
    EXPECT_EQ(std::memcmp(got.raw_data(), want.raw_data(), want.nbytes()), 0) << entry.path();
    ++compared;
  }
  EXPECT_GT(compared, 0u);
  const nlohmann::json report = read_json(dir / "run.json");
  EXPECT_EQ(report.at("ranks"), nlohmann::json({{"world_size", c.ranks}, {"rows", c.rows}}))
      << report;
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Models, DistributedRun,
                         ::testing::Values(RunCase{"mlp", 3, 7, {3, 2, 2}},
                                           RunCase{"cnn", 2, 5, {3, 2}},
                                           RunCase{"transformer", 2, 3, {2, 1}},
                                           RunCase{"mlp", 3, 2, {1, 1, 0}}),
                         [](const auto& info) {
                           return info.param.model + "_batch_" + std::to_string(info.param.batch) +
                                  "_on_" + std::to_string(info.param.ranks) + "_ranks";
                         });

TEST(DistributedRunFaults, ABadInputFileOnOneRankEndsTheJob) {
  fs::path dir = scratch("run_bad");
  write_npy(Tensor::zeros({4, 785}, DType::Float32), (dir / "wide.npy").string());
  std::string common = source_path("models/mlp.onnx") + " --devices cpu:0 --distributed";
  std::string command = testing::mpirun(1) + " " + DPRUN_BINARY + " " + common + " --batch 4" +
                        " : -n 1 " + DPRUN_BINARY + " " + common +
                        " --input input=" + (dir / "wide.npy").string();
  auto r = testing::run_command(command, 120);
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("dprun: error: rank 1: input 'input' expects shape [batch, 784] but "
                          "got [4, 785]\n"),
            std::string::npos)
      << r.output;
  fs::remove_all(dir);
}

TEST(DistributedBench, ReportsEveryRankAndTheScalingOverRanks) {
  fs::path dir = scratch("bench");
  auto r = run_ranks(2, "bench " + source_path("models/mlp.onnx") +
                            " --batch 64 --devices cpu:0 --threads 1 --iters 5 --warmup 1 --sweep"
                            " --distributed --json " +
                            (dir / "bench.json").string());
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("batch 64 over 2 ranks, each on cpu:0, 5 iterations (+1 warm-up)"),
            std::string::npos)
      << r.output;
  EXPECT_TRUE(std::regex_search(r.output, std::regex(R"(\n0 +32 +[0-9.]+ +[0-9.]+%\n1 +32 )")))
      << r.output;
  EXPECT_TRUE(std::regex_search(r.output, std::regex(R"(\n1 +[0-9.]+ +1\.00x +100\.0%\n2 +)")))
      << r.output;
  const nlohmann::json report = read_json(dir / "bench.json");
  EXPECT_EQ(report.at("world_size"), 2) << report;
  const nlohmann::json& per_rank = report.at("per_rank");
  const nlohmann::json& sweep = report.at("sweep");
  ASSERT_EQ(per_rank.size(), 2u) << report;
  ASSERT_EQ(sweep.size(), 2u) << report;
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_EQ(per_rank[rank].at("rank"), rank) << report;
    EXPECT_EQ(per_rank[rank].at("rows"), 32) << report;
    EXPECT_EQ(sweep[rank].at("ranks"), rank + 1) << report;
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace dprun
