// The batches of a data set read from .npy files (loader/training_data_files.h): rows in file
// order, and for an accelerator one buffer per input reused from batch to batch while its shape
// stays the same.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "loader/npy.h"
#include "loader/training_data_files.h"

namespace dprun {
namespace {

namespace fs = std::filesystem;

std::vector<float> values_of(const Tensor& t) {
  return std::vector<float>(t.data<float>(), t.data<float>() + t.numel());
}

class TrainDataFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("dprun_train_data_" + std::to_string(getpid()));
    fs::create_directories(dir_);
    // x: 5 rows of 2 (row r is r, r + 0.5); target: 5 rows of 1 (row r is 10 r).
    write_npy(Tensor::from_vector<float>({5, 2}, {0, 0.5, 1, 1.5, 2, 2.5, 3, 3.5, 4, 4.5}),
              (dir_ / "x.npy").string());
    write_npy(Tensor::from_vector<float>({5, 1}, {0, 10, 20, 30, 40}), (dir_ / "t.npy").string());
    options_.input_names = {"x"};
    options_.files = {{"x", (dir_ / "x.npy").string()}};
    options_.target_file = (dir_ / "t.npy").string();
    options_.batch = 2;
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path dir_;
  TrainingDataFiles options_;
};

TEST_F(TrainDataFiles, BatchesFollowTheFileAndTheLastIsPartial) {
  TrainingData data = read_training_data(options_);
  EXPECT_EQ(data.batches_per_epoch(), 3);
  Batch b = data.batch(0, 1);
  EXPECT_EQ(b.rows, 2);
  EXPECT_EQ(values_of(b.inputs[0]), (std::vector<float>{2, 2.5, 3, 3.5}));
  EXPECT_EQ(values_of(b.target), (std::vector<float>{20, 30}));
  Batch last = data.batch(0, 2);
  EXPECT_EQ(last.inputs[0].shape(), (Shape{1, 2}));
  EXPECT_EQ(values_of(last.target), (std::vector<float>{40}));
  // Files are mapped and each batch's pages released once its rows are gathered: every batch is
  // new memory.
  EXPECT_FALSE(data.batch(0, 0).inputs[0].shares_storage_with(data.batch(0, 1).inputs[0]));
}

TEST(TrainDataInMemory, RowsInOrderAreTheDatasOwnAndShuffledRowsAreGathered) {
  const Tensor x = Tensor::from_vector<float>({5, 2}, {0, 0.5, 1, 1.5, 2, 2.5, 3, 3.5, 4, 4.5});
  const Tensor t = Tensor::from_vector<float>({5}, {0, 10, 20, 30, 40});
  TrainingData data({"x"}, {x}, t, TrainingDataOptions{.batch = 2});
  // No batch is gathered: each is a view of the data's rows.
  const Batch b = data.batch(0, 1);
  EXPECT_EQ(values_of(b.inputs[0]), (std::vector<float>{2, 2.5, 3, 3.5}));
  EXPECT_TRUE(b.inputs[0].shares_storage_with(x));
  EXPECT_TRUE(data.batch(0, 2).target.shares_storage_with(t));
  // Shuffled rows that are not one run are gathered into new memory (the permutation of seed 0
  // starts with rows 2 and 0).
  TrainingData shuffled({"x"}, {x}, t, TrainingDataOptions{.batch = 2, .shuffle = true});
  const Batch mixed = shuffled.batch(0, 0);
  EXPECT_EQ(values_of(mixed.target), (std::vector<float>{20, 0}));
  EXPECT_FALSE(mixed.inputs[0].shares_storage_with(x));
  // A distributed rank's shard of rows 0, 2 of a batch of 4 is gathered too.
  TrainingData sharded({"x"}, {x}, t, TrainingDataOptions{.batch = 4});
  const Batch shard = sharded.batch(0, 0, 0, 2);
  EXPECT_EQ(values_of(shard.target), (std::vector<float>{0, 20}));
  EXPECT_FALSE(shard.inputs[0].shares_storage_with(x));
}

TEST_F(TrainDataFiles, ForAnAcceleratorEachInputKeepsOneBufferWhileItsShapeStays) {
  options_.pin_for = Device::sim(0);
  TrainingData data = read_training_data(options_);
  const Batch first = data.batch(0, 0);
  const Tensor first_x = first.inputs[0], first_target = first.target;
  EXPECT_EQ(values_of(first_x), (std::vector<float>{0, 0.5, 1, 1.5}));
  const Batch second = data.batch(0, 1);
  EXPECT_TRUE(second.inputs[0].shares_storage_with(first_x));
  EXPECT_TRUE(second.target.shares_storage_with(first_target));
  EXPECT_FALSE(second.inputs[0].shares_storage_with(second.target));
  EXPECT_EQ(values_of(second.inputs[0]), (std::vector<float>{2, 2.5, 3, 3.5}));
  EXPECT_EQ(values_of(second.target), (std::vector<float>{20, 30}));
  const Batch last = data.batch(0, 2);  // one row: a buffer of its own size
  EXPECT_FALSE(last.inputs[0].shares_storage_with(first_x));
  EXPECT_EQ(values_of(last.inputs[0]), (std::vector<float>{4, 4.5}));
  EXPECT_EQ(last.inputs[0].device(), Device::cpu());
}

// --accumulate gathers a step's batches before its first forward pass: with two in use, the
// second batch must not write over the first's rows, and the third takes the first's buffers.
TEST_F(TrainDataFiles, BatchesInUseTogetherKeepBuffersOfTheirOwn) {
  options_.pin_for = Device::sim(0);
  options_.batches_in_use = 2;
  TrainingData data = read_training_data(options_);
  const Batch first = data.batch(0, 0);
  const Batch second = data.batch(0, 1);
  EXPECT_FALSE(second.inputs[0].shares_storage_with(first.inputs[0]));
  EXPECT_FALSE(second.target.shares_storage_with(first.target));
  EXPECT_EQ(values_of(first.inputs[0]), (std::vector<float>{0, 0.5, 1, 1.5}));
  EXPECT_EQ(values_of(second.inputs[0]), (std::vector<float>{2, 2.5, 3, 3.5}));
  const Batch third = data.batch(1, 0);  // the next step's first batch
  EXPECT_TRUE(third.inputs[0].shares_storage_with(first.inputs[0]));
  EXPECT_EQ(values_of(second.inputs[0]), (std::vector<float>{2, 2.5, 3, 3.5}));
}

}  // namespace
}  // namespace dprun
