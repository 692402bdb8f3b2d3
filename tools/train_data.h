#pragma once
// The data set of `dprun train`: the rows of each input file (and of the target), served as
// batches in file order or reshuffled each epoch from a seed.
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "engine/tensor.h"

namespace dprun::cli {

struct TrainingDataOptions {
  std::vector<std::string> input_names;      // the model's inputs, in order
  std::map<std::string, std::string> files;  // input name -> .npy path
  std::string target_file;                   // empty when the loss takes no target
  int64_t dim = 0;                           // the rows' dim in the input files
  int64_t batch = 1;
  bool shuffle = false;
  uint64_t seed = 0;
};

/// One batch, or one rank's shard of it: the inputs in model order and the target (undefined
/// when there is none).
struct Batch {
  std::vector<Tensor> inputs;
  Tensor target;
  int64_t rows = 0;         // rows of this shard
  int64_t global_rows = 0;  // rows of the whole batch
};

class TrainingData {
 public:
  /// Reads every file. Throws Error naming the input when a file is missing for a model input,
  /// names an input the model does not have, or holds a different number of rows than the
  /// first (the target's rows are along dim 0).
  explicit TrainingData(const TrainingDataOptions& options);

  int64_t rows() const { return rows_; }
  /// Batches per epoch: ceil(rows / batch); the last may be partial.
  int64_t batches_per_epoch() const { return (rows_ + options_.batch - 1) / options_.batch; }
  /// Batch `k` of epoch `epoch` (k < batches_per_epoch()). Without shuffling, batch k is rows
  /// k*batch .. k*batch+batch-1; with it, the same slice of that epoch's permutation. Of a
  /// distributed run's batch, rank `rank` of `world_size` takes the positions
  /// shard_positions(batch rows, rank, world_size) (engine/parallel/distributed.h): the
  /// batch's rows rank, rank + world_size, ..., in that order.
  Batch batch(int64_t epoch, int64_t k, int rank = 0, int world_size = 1);

 private:
  const std::vector<int64_t>& order_of(int64_t epoch);

  TrainingDataOptions options_;
  std::vector<Tensor> inputs_;
  Tensor target_;
  int64_t rows_ = 0;
  int64_t cached_epoch_ = -1;
  std::vector<int64_t> order_;
};

/// The rows `indices` of `t` along `dim`, in that order, as a new tensor.
Tensor take_rows(const Tensor& t, int64_t dim, const std::vector<int64_t>& indices);

}  // namespace dprun::cli
