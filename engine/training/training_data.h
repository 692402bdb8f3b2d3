#pragma once
// A training data set in memory: one tensor per model input (rows along one dim) and an
// optional target (rows along dim 0), served as batches in row order or reshuffled each epoch
// from a seed, and sliced for the ranks of a distributed run; an input may be transformed per
// sample as each batch is gathered (engine/training/input_transform.h: layout, integer
// images to float, augmentation, normalization). loader/training_data_files.h reads one from
// .npy files.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "engine/device.h"
#include "engine/tensor.h"
#include "engine/training/input_transform.h"

namespace dprun {

/// How a data set is batched.
struct TrainingDataOptions {
  int64_t dim = 0;  // the rows' dim in the inputs (negative counts from the end)
  int64_t batch = 1;
  bool shuffle = false;
  uint64_t seed = 0;
  /// The accelerator the batches are copied to, if any: each batch is gathered into host
  /// memory that device copies from by DMA (page-locked on CUDA; see Tensor::pin_memory), one
  /// buffer per input kept from batch to batch while its shape stays the same. Unset, or a
  /// device whose backend has no such memory: each batch in new ordinary memory.
  std::optional<Device> pin_for;
  /// With `pin_for`: how many batches are in use at once (gradient accumulation gathers a
  /// step's batches before the first forward pass); calls to batch() take their buffers in turn.
  int64_t batches_in_use = 1;
  /// By input name: how its stored rows become the model's float32 samples, each batch's
  /// samples transformed as the batch is gathered (the stored rows keep their type). A sample's
  /// random draws come from (seed, epoch, its row in the data), nothing else. Rows along dim 0
  /// only.
  std::map<std::string, InputTransform> transforms;
  /// Validation rows: the transforms draw nothing (resized-crop takes its evaluation form).
  bool evaluation = false;
  /// The inputs and the target are read-only views of files' pages (engine/mapped_file.h's
  /// map_file): the pages of each batch's rows (along dim 0) are given back once it is gathered,
  /// so that a data set larger than memory keeps little more than a batch resident. Never set
  /// it for other memory: what release_mapped_pages gives back of it is lost.
  bool release_rows = false;
};

/// One batch, or one rank's shard of it: the inputs in model order and the target (undefined
/// when there is none).
struct Batch {
  std::vector<Tensor> inputs;
  Tensor target;
  int64_t rows = 0;         // rows of this shard
  int64_t global_rows = 0;  // rows of the whole batch
};

/// The rows of `t` along `dim` (negative counts from the end). Throws Error "WHAT has shape
/// [..], which has no dim D to take rows from" when `t` has no such dim.
int64_t rows_along(const Tensor& t, int64_t dim, const std::string& what);

/// Throws Error "input 'NAME' has N rows along dim D but input 'FIRST' has M" when `rows`
/// (of input `name`) differs from `first_rows` (of input `first`).
void check_input_rows(const std::string& name, int64_t rows, const std::string& first,
                      int64_t first_rows, int64_t dim);

/// Throws Error "the target has N rows but input 'FIRST' has M" when the target's dim 0
/// differs from the inputs' rows.
void check_target_rows(const Tensor& target, const std::string& first, int64_t first_rows);

class TrainingData {
 public:
  /// A data set of `inputs` (the model's inputs in order, named `input_names` in messages) and
  /// `target` (undefined when the loss takes none). Throws Error when the lists differ in
  /// length, an input has no dim options.dim (rows_along), two inputs or the target and the
  /// inputs differ in rows (check_input_rows, check_target_rows), the target is 0-d ("the
  /// target is a 0-d tensor; it needs one row per sample"), there are no rows ("the training
  /// data has no rows", also without inputs), or options.batch < 1; a transform for no input
  /// ("--normalize names 'N', which is not an input of the model", or --layout, --augment), a
  /// transform with rows along another dim than 0, or one that does not fit its input
  /// (transformed_sample_shape). The tensors are shared, not
  /// copied: they must live in host memory and not change while the data set is used.
  TrainingData(const std::vector<std::string>& input_names, std::vector<Tensor> inputs,
               Tensor target, const TrainingDataOptions& options);

  int64_t rows() const { return rows_; }
  /// The shape of one sample of input `i` as batches hold it (the row dim left out, for
  /// rows along dim 0): the stored rows', or the transformed samples'.
  Shape sample_shape(size_t i) const;
  /// The type of input `i`'s stored rows (a transformed input's batches are float32).
  DType input_dtype(size_t i) const { return inputs_[i].dtype(); }
  /// Batches per epoch: ceil(rows / batch); the last may be partial.
  int64_t batches_per_epoch() const { return (rows_ + options_.batch - 1) / options_.batch; }
  /// Batch `k` of epoch `epoch` (k < batches_per_epoch()). Without shuffling, batch k is rows
  /// k*batch .. k*batch+batch-1; with it, the same slice of that epoch's permutation (a
  /// Fisher-Yates shuffle seeded from (seed, epoch), the same on every platform). Of a
  /// distributed run's batch, rank `rank` of `world_size` takes the positions
  /// shard_positions(batch rows, rank, world_size) (engine/training/distributed_data_parallel.h):
  /// the batch's rows rank, rank + world_size, ..., in that order. With `pin_for`, the batch's
  /// tensors are buffers that the call `batches_in_use` calls later writes again. Without it,
  /// and without release_rows, an untransformed input of a batch of consecutive rows (no
  /// shuffling, one rank) is the data's own rows (Tensor::narrow: a view where they are
  /// contiguous in memory), as is the target; any other in new memory. Throws Error
  /// when batch k is past the end of the data, or a tensor holds strings.
  Batch batch(int64_t epoch, int64_t k, int rank = 0, int world_size = 1);

 private:
  const std::vector<int64_t>& order_of(int64_t epoch);
  // Where the rows `rows` of `source` (along `dim`) are gathered: buffer `slot` of
  // `buffers`, made again when the shape changes, or without buffers new ordinary memory.
  Tensor destination(std::vector<Tensor>* buffers, size_t slot, Shape shape, DType dtype);
  // Writes the transformed samples `rows` of input `i` into `out`.
  void transform_rows(size_t i, int64_t epoch, const std::vector<int64_t>& rows, Tensor& out) const;

  TrainingDataOptions options_;
  std::vector<Tensor> inputs_;
  // By input: its transform (none when it is served as stored) and a transformed sample's
  // shape.
  std::vector<std::optional<InputTransform>> transforms_;
  std::vector<Shape> transformed_shapes_;
  Tensor target_;
  int64_t rows_ = 0;
  int64_t cached_epoch_ = -1;
  std::vector<int64_t> order_;
  // By buffer set, then slot: the inputs in order, then the target.
  std::vector<std::vector<Tensor>> pinned_;
  size_t next_set_ = 0;  // the set of pinned_ the next batch() call writes
};

}  // namespace dprun
