// `dprun train --distributed --augment` over 2 ranks: each rank augments its shard of a batch
// by (--seed, epoch, each sample's row in the file), so the run equals, bit for bit, the same
// distributed run on the file-order transforms written as float32 beforehand.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>
#include <string>

#include "engine/training/training_data.h"
#include "loader/npy.h"
#include "mpi_test_util.h"

namespace dprun {
namespace {

namespace fs = std::filesystem;
using testing::run_ranks;
using testing::scratch;

TEST(DistributedTransforms, RanksAugmentTheirShardsAsOneProcessAugmentsTheFile) {
  const fs::path dir = scratch("transforms");
  const int64_t rows = 16;
  std::mt19937 rng(5);
  std::vector<uint8_t> pixels(static_cast<size_t>(rows * 8 * 8 * 3));
  for (uint8_t& p : pixels) p = static_cast<uint8_t>(rng() % 256);
  std::vector<int64_t> labels(static_cast<size_t>(rows));
  for (int64_t& l : labels) l = static_cast<int64_t>(rng() % 4);
  write_npy(Tensor::from_vector<uint8_t>({rows, 8, 8, 3}, pixels), (dir / "x.npy").string());
  write_npy(Tensor::from_vector<int64_t>({rows}, labels), (dir / "y.npy").string());
  TrainingDataOptions options{.batch = rows, .seed = 4};
  parse_layout("x", "nhwc", options.transforms["x"]);
  parse_augment("x", "hflip,crop:2,cutout:3", options.transforms["x"]);
  TrainingData data({"x"}, {read_npy((dir / "x.npy").string())}, Tensor(), options);
  write_npy(data.batch(0, 0).inputs[0], (dir / "transformed.npy").string());

  auto train = [&](const std::string& file, const std::string& extra, const std::string& out) {
    return run_ranks(2, "train " + testing::source_path("models/training/cnn_bn_1dev.onnx") +
                            " --input x=" + (dir / file).string() + " --target " +
                            (dir / "y.npy").string() +
                            " --loss cross_entropy --optimizer sgd --lr 0.05 --batch 8 --steps 2 "
                            "--no-shuffle --seed 4 --devices cpu:0 --distributed --deterministic " +
                            extra + " --save " + (dir / (out + ".onnx")).string() + " --json " +
                            (dir / (out + ".json")).string());
  };
  auto augmented = train("x.npy", "--layout x=nhwc --augment x=hflip,crop:2,cutout:3", "aug");
  ASSERT_EQ(augmented.status, 0) << augmented.output;
  auto stored = train("transformed.npy", "", "stored");
  ASSERT_EQ(stored.status, 0) << stored.output;
  const auto losses = [&](const std::string& out) {
    return testing::numbers(testing::read_json(dir / (out + ".json")), "losses");
  };
  ASSERT_TRUE(losses("aug").has_value());
  EXPECT_EQ(losses("aug"), losses("stored"));
  EXPECT_EQ(testing::read_text(dir / "aug.onnx"), testing::read_text(dir / "stored.onnx"));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace dprun
