// The library's data set from in-memory tensors (engine/training/training_data.h): batches in
// row order or shuffled, sliced for the ranks of a distributed run, and the refusals, each
// naming what does not fit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "engine/training/data_checks.h"
#include "engine/training/training_data.h"
#include "error_test_util.h"

namespace dprun {
namespace {

std::vector<float> values_of(const Tensor& t) {
  return std::vector<float>(t.data<float>(), t.data<float>() + t.numel());
}

// x: 7 rows of 2 (row r is r, r + 0.5); y: int64 [7] (row r is 10 r).
class TrainingDataInMemory : public ::testing::Test {
 protected:
  TrainingDataInMemory() {
    std::vector<float> xs;
    std::vector<int64_t> ys;
    for (int r = 0; r < 7; ++r) {
      xs.insert(xs.end(), {static_cast<float>(r), r + 0.5f});
      ys.push_back(10 * r);
    }
    x_ = Tensor::from_vector<float>({7, 2}, xs);
    y_ = Tensor::from_vector<int64_t>({7}, ys);
    options_.batch = 3;
  }

  TrainingData data() { return TrainingData({"x"}, {x_}, y_, options_); }

  Tensor x_, y_;
  TrainingDataOptions options_;
};

std::vector<int64_t> labels_of(const Batch& b) {
  return std::vector<int64_t>(b.target.data<int64_t>(), b.target.data<int64_t>() + b.rows);
}

TEST_F(TrainingDataInMemory, BatchesFollowTheRowsAndTheLastIsPartial) {
  TrainingData d = data();
  EXPECT_EQ(d.rows(), 7);
  EXPECT_EQ(d.batches_per_epoch(), 3);
  const Batch b = d.batch(0, 1);
  EXPECT_EQ(b.rows, 3);
  EXPECT_EQ(b.global_rows, 3);
  EXPECT_EQ(values_of(b.inputs[0]), (std::vector<float>{3, 3.5, 4, 4.5, 5, 5.5}));
  EXPECT_EQ(labels_of(b), (std::vector<int64_t>{30, 40, 50}));
  const Batch last = d.batch(0, 2);
  EXPECT_EQ(last.inputs[0].shape(), (Shape{1, 2}));
  EXPECT_EQ(labels_of(last), (std::vector<int64_t>{60}));
  EXPECT_EQ(testing::error_of([&] { d.batch(0, 3); }), "batch 3 is past the end of the data");
}

// Rank r of 2 takes the batch's rows r, r + 2, ...: rows 3 and 5 of batch 1 for rank 0, row 4
// for rank 1; both know the whole batch's rows.
TEST_F(TrainingDataInMemory, EachRankTakesEveryWorldSizethRowOfTheBatch) {
  TrainingData d = data();
  const Batch rank0 = d.batch(0, 1, 0, 2), rank1 = d.batch(0, 1, 1, 2);
  EXPECT_EQ(labels_of(rank0), (std::vector<int64_t>{30, 50}));
  EXPECT_EQ(labels_of(rank1), (std::vector<int64_t>{40}));
  EXPECT_EQ(values_of(rank1.inputs[0]), (std::vector<float>{4, 4.5}));
  EXPECT_EQ(rank0.rows, 2);
  EXPECT_EQ(rank1.rows, 1);
  EXPECT_EQ(rank0.global_rows, 3);
  EXPECT_EQ(rank1.global_rows, 3);
}

// With shuffling each epoch is a permutation of every row, another one each epoch, and the
// same for the same seed; inputs and target stay paired.
TEST_F(TrainingDataInMemory, ShufflingPermutesEveryRowPerEpochFromTheSeed) {
  options_.shuffle = true;
  options_.seed = 5;
  auto epoch_labels = [&](TrainingData& d, int64_t epoch) {
    std::vector<int64_t> labels;
    for (int64_t k = 0; k < d.batches_per_epoch(); ++k) {
      const Batch b = d.batch(epoch, k);
      for (int64_t i = 0; i < b.rows; ++i)
        EXPECT_EQ(b.inputs[0].data<float>()[2 * i] * 10, b.target.data<int64_t>()[i]);
      const std::vector<int64_t> some = labels_of(b);
      labels.insert(labels.end(), some.begin(), some.end());
    }
    return labels;
  };
  TrainingData d = data(), again = data();
  const std::vector<int64_t> first = epoch_labels(d, 0), second = epoch_labels(d, 1);
  std::vector<int64_t> sorted = first;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, (std::vector<int64_t>{0, 10, 20, 30, 40, 50, 60}));
  EXPECT_NE(first, second);
  EXPECT_EQ(epoch_labels(again, 0), first);
}

TEST_F(TrainingDataInMemory, RowsAlongAnotherDim) {
  options_.dim = 1;
  options_.batch = 2;
  const Tensor xt = Tensor::from_vector<float>({2, 3}, {0, 1, 2, 10, 11, 12});
  TrainingData d({"x"}, {xt}, Tensor(), options_);
  EXPECT_EQ(d.rows(), 3);
  const Batch b = d.batch(0, 1);
  EXPECT_EQ(b.inputs[0].shape(), (Shape{2, 1}));
  EXPECT_EQ(values_of(b.inputs[0]), (std::vector<float>{2, 12}));
  EXPECT_FALSE(b.target.defined());
}

TEST_F(TrainingDataInMemory, RefusalsNameWhatDoesNotFit) {
  const Tensor other = Tensor::from_vector<float>({6, 1}, {0, 1, 2, 3, 4, 5});
  EXPECT_EQ(testing::error_of([&] {
              TrainingData({"x", "m"}, {x_, other}, y_, options_);
            }),
            "input 'm' has 6 rows along dim 0 but input 'x' has 7");
  EXPECT_EQ(testing::error_of([&] { TrainingData({"x"}, {x_}, y_.narrow(0, 0, 5), options_); }),
            "the target has 5 rows but input 'x' has 7");
  EXPECT_EQ(
      testing::error_of([&] { TrainingData({"x"}, {x_}, Tensor::scalar<int64_t>(1), options_); }),
      "the target is a 0-d tensor; it needs one row per sample");
  EXPECT_EQ(
      testing::error_of([&] { TrainingData({"x"}, {x_.narrow(0, 0, 0)}, Tensor(), options_); }),
      "the training data has no rows");
  EXPECT_EQ(testing::error_of([&] {
              TrainingData({"x", "m"}, {x_}, y_, options_);
            }),
            "training data: 1 input tensors for 2 input names");
  options_.dim = 2;
  EXPECT_EQ(testing::error_of([&] { data(); }),
            "input 'x' has shape [7, 2], which has no dim 2 to take rows from");
  options_.dim = 0;
  options_.batch = 0;
  EXPECT_EQ(testing::error_of([&] { data(); }),
            "training data: the batch size is 0; it must be at least 1");
}

TEST(TrainingDataChecks, NonFiniteRowsAndLabelsAreNamedBySourceAndRow) {
  const Tensor x = Tensor::from_vector<float>({3, 2}, {0, 1, 2, NAN, 4, INFINITY});
  EXPECT_EQ(testing::error_of([&] { check_finite_rows(x, 0, "train.x"); }),
            "train.x: row 1 holds NaN: training needs finite numbers");
  const Tensor labels = Tensor::from_vector<int64_t>({3}, {0, -100, 4});
  const ClassLabels four{.classes = 4, .output = "y"};
  EXPECT_EQ(testing::error_of([&] { check_class_labels(labels, four, "t"); }),
            "t: row 1 holds class -100, outside [0, 4) of output 'y'");
  const ClassLabels ignoring{.classes = 4, .ignore_index = -100, .output = "y"};
  EXPECT_NO_THROW(check_class_labels(labels.narrow(0, 0, 2), ignoring, "t"));
  EXPECT_EQ(
      testing::error_of([&] { check_class_labels(labels, ignoring, "t"); }),
      "t: row 2 holds class 4, outside [0, 4) of output 'y' and is not the --ignore-index -100");
}

}  // namespace
}  // namespace dprun
