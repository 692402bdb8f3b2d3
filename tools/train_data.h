#pragma once
// The data set of `dprun train`: the rows of each input file (and of the target), served as
// batches in file order or reshuffled each epoch from a seed.
#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "engine/autograd/loss.h"
#include "engine/model.h"
#include "engine/tensor.h"

namespace dprun::cli {

// Checks of the data when it is read, so that a bad value is named once, by file and row, before
// any step runs.

/// The labels a class loss (cross_entropy, nll) accepts: 0 .. classes - 1, and ignore_index.
struct ClassLabels {
  int64_t classes = 0;
  std::optional<int64_t> ignore_index;
  std::string output;  // the model output that scores them
};

/// The labels `loss` accepts on `model`: nullopt for a loss without class labels, or when the
/// output's class dim has no fixed size (the loss's kernel then checks each batch as it runs).
std::optional<ClassLabels> class_labels(const Model& model, const LossSpec& loss);

/// Throws Error "PATH: is a directory; `option` takes a .npy file" when `path` is a folder
/// (read_npy would say "file not found").
void check_not_directory(const std::string& path, const std::string& option);

/// Throws Error "PATH: row R holds NaN: training needs finite numbers" (or inf, -inf) for the
/// lowest row R (index along `dim`, from 0, as numpy counts) that holds a value that is not
/// finite. Tensors that are not floating point pass.
void check_finite_rows(const Tensor& t, int64_t dim, const std::string& path);

/// Throws Error "PATH: row R holds class C, outside [0, N) of output 'O'..." for the first
/// target row (dim 0) with a label that is neither a class nor the ignore index. Only int64
/// targets are checked (the loss refuses others, naming their dtype).
void check_class_labels(const Tensor& target, const ClassLabels& labels, const std::string& path);

struct TrainingDataOptions {
  std::vector<std::string> input_names;      // the model's inputs, in order
  std::map<std::string, std::string> files;  // input name -> .npy path
  std::string target_file;                   // empty when the loss takes no target
  int64_t dim = 0;                           // the rows' dim in the input files
  int64_t batch = 1;
  bool shuffle = false;
  uint64_t seed = 0;
  /// The accelerator the batches are copied to, if any: each batch is gathered into host
  /// memory that device copies from by DMA (page-locked on CUDA; see Tensor::pin_memory), one
  /// buffer per input kept from batch to batch while its shape stays the same. Unset, or a
  /// device whose backend has no such memory: each batch in new ordinary memory.
  std::optional<Device> pin_for;
  /// With a class loss whose model output has a fixed number of classes: the labels the
  /// target may hold (class_labels), checked when it is read.
  std::optional<ClassLabels> labels;
  /// How the options that name the files are called in messages: "" (--input, --target) or
  /// "val-" (--val-input, --val-target).
  std::string option_prefix;
  /// With `pin_for`: how many batches are in use at once (--accumulate gathers a step's
  /// batches before the first forward pass); calls to batch() take their buffers in turn.
  int64_t batches_in_use = 1;
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
  /// first (the target's rows are along dim 0); naming the file and the row when a
  /// floating-point file holds a NaN or an infinity, or the target a label outside `labels`;
  /// naming the path when it is a directory.
  explicit TrainingData(const TrainingDataOptions& options);

  int64_t rows() const { return rows_; }
  /// Batches per epoch: ceil(rows / batch); the last may be partial.
  int64_t batches_per_epoch() const { return (rows_ + options_.batch - 1) / options_.batch; }
  /// Batch `k` of epoch `epoch` (k < batches_per_epoch()). Without shuffling, batch k is rows
  /// k*batch .. k*batch+batch-1; with it, the same slice of that epoch's permutation. Of a
  /// distributed run's batch, rank `rank` of `world_size` takes the positions
  /// shard_positions(batch rows, rank, world_size) (engine/parallel/distributed.h): the
  /// batch's rows rank, rank + world_size, ..., in that order. With `pin_for`, the batch's
  /// tensors are buffers that the call `batches_in_use` calls later writes again.
  Batch batch(int64_t epoch, int64_t k, int rank = 0, int world_size = 1);

 private:
  const std::vector<int64_t>& order_of(int64_t epoch);
  // Where the rows `rows` of `source` (along `dim`) are gathered: buffer `slot` of
  // `buffers`, made again when the shape changes, or without buffers new ordinary memory.
  Tensor destination(std::vector<Tensor>* buffers, size_t slot, const Tensor& source, int64_t dim,
                     size_t rows);

  TrainingDataOptions options_;
  std::vector<Tensor> inputs_;
  Tensor target_;
  int64_t rows_ = 0;
  int64_t cached_epoch_ = -1;
  std::vector<int64_t> order_;
  // By buffer set, then slot: the inputs in order, then the target.
  std::vector<std::vector<Tensor>> pinned_;
  size_t next_set_ = 0;  // the set of pinned_ the next batch() call writes
};

}  // namespace dprun::cli
