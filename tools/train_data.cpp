#include "tools/train_data.h"

#include <cstring>
#include <numeric>

#include "engine/parallel/distributed.h"
#include "loader/npy.h"

namespace dprun::cli {

namespace {

int64_t resolve_dim(const Tensor& t, int64_t dim, const std::string& what) {
  int64_t d = dim < 0 ? dim + t.rank() : dim;
  DPRUN_CHECK(d >= 0 && d < t.rank(), what, " has shape ", shape_to_string(t.shape()),
              ", which has no dim ", dim, " to take rows from");
  return d;
}

// The shape of `rows` rows of `t` along `dim`.
Shape rows_shape(const Tensor& t, int64_t dim, size_t rows) {
  Shape shape = t.shape();
  shape[static_cast<size_t>(resolve_dim(t, dim, "a tensor"))] = static_cast<int64_t>(rows);
  return shape;
}

// Copies rows `indices` of `t` along `dim` into `out` (rows_shape(t, dim, indices.size())).
void copy_rows(const Tensor& t, int64_t dim, const std::vector<int64_t>& indices, Tensor& out) {
  int64_t d = resolve_dim(t, dim, "a tensor");
  const Shape& shape = t.shape();
  int64_t rows = shape[static_cast<size_t>(d)];
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < d; ++i) outer *= shape[static_cast<size_t>(i)];
  for (int64_t i = d + 1; i < t.rank(); ++i) inner *= shape[static_cast<size_t>(i)];
  size_t row_bytes = static_cast<size_t>(inner) * dtype_size(t.dtype());
  const char* src = static_cast<const char*>(t.raw_data());
  char* dst = static_cast<char*>(out.raw_data());
  for (int64_t o = 0; o < outer; ++o)
    for (size_t k = 0; k < indices.size(); ++k)
      std::memcpy(dst + (static_cast<size_t>(o) * indices.size() + k) * row_bytes,
                  src + static_cast<size_t>(o * rows + indices[k]) * row_bytes, row_bytes);
}

}  // namespace

TrainingData::TrainingData(const TrainingDataOptions& options) : options_(options) {
  for (const auto& [name, path] : options_.files) {
    bool known = false;
    for (const auto& input : options_.input_names) known |= input == name;
    DPRUN_CHECK(known, "--input names '", name, "', which is not an input of the model");
  }
  std::string first;
  for (const auto& name : options_.input_names) {
    auto it = options_.files.find(name);
    DPRUN_CHECK(it != options_.files.end(), "training needs data for input '", name,
                "': give --input ", name, "=FILE.npy");
    Tensor t = read_npy(it->second);
    int64_t n = t.dim(resolve_dim(t, options_.dim, "input '" + name + "'"));
    if (first.empty()) {
      first = name;
      rows_ = n;
    }
    DPRUN_CHECK(n == rows_, "input '", name, "' has ", n, " rows along dim ", options_.dim,
                " but input '", first, "' has ", rows_);
    inputs_.push_back(t);
  }
  if (!options_.target_file.empty()) {
    target_ = read_npy(options_.target_file);
    DPRUN_CHECK(target_.rank() >= 1, "the target file ", options_.target_file,
                " holds a 0-d array; it needs one row per sample");
    DPRUN_CHECK(target_.dim(0) == rows_, "the target has ", target_.dim(0), " rows but input '",
                first, "' has ", rows_);
  }
  DPRUN_CHECK(rows_ > 0, "the training data has no rows");
}

const std::vector<int64_t>& TrainingData::order_of(int64_t epoch) {
  if (epoch == cached_epoch_) return order_;
  order_.resize(static_cast<size_t>(rows_));
  std::iota(order_.begin(), order_.end(), 0);
  if (options_.shuffle) {
    // Fisher-Yates with a generator seeded from (seed, epoch): the same on every platform.
    std::mt19937_64 rng(options_.seed * 1000003u + static_cast<uint64_t>(epoch));
    for (size_t i = order_.size() - 1; i > 0; --i) {
      size_t j = static_cast<size_t>(rng() % (i + 1));
      std::swap(order_[i], order_[j]);
    }
  }
  cached_epoch_ = epoch;
  return order_;
}

Batch TrainingData::batch(int64_t epoch, int64_t k, int rank, int world_size) {
  const auto& order = order_of(epoch);
  int64_t start = k * options_.batch;
  int64_t end = std::min(rows_, start + options_.batch);
  DPRUN_CHECK(start < end, "batch ", k, " is past the end of the data");
  std::vector<int64_t> rows;
  for (int64_t p : shard_positions(end - start, rank, world_size))
    rows.push_back(order[static_cast<size_t>(start + p)]);
  Batch b;
  b.rows = static_cast<int64_t>(rows.size());
  b.global_rows = end - start;
  std::vector<Tensor>* buffers = nullptr;  // with pin_for, the sets are taken in turn
  if (options_.pin_for) {
    if (pinned_.empty())
      pinned_.resize(static_cast<size_t>(std::max<int64_t>(1, options_.batches_in_use)));
    buffers = &pinned_[next_set_];
    next_set_ = (next_set_ + 1) % pinned_.size();
  }
  for (size_t i = 0; i < inputs_.size(); ++i) {
    b.inputs.push_back(destination(buffers, i, inputs_[i], options_.dim, rows.size()));
    copy_rows(inputs_[i], options_.dim, rows, b.inputs.back());
  }
  if (target_.defined()) {
    b.target = destination(buffers, inputs_.size(), target_, 0, rows.size());
    copy_rows(target_, 0, rows, b.target);
  }
  return b;
}

Tensor TrainingData::destination(std::vector<Tensor>* buffers, size_t slot, const Tensor& source,
                                 int64_t dim, size_t rows) {
  DPRUN_CHECK(source.dtype() != DType::String, "string tensors cannot be batched for training");
  Shape shape = rows_shape(source, dim, rows);
  if (!buffers) return Tensor::empty(std::move(shape), source.dtype());
  if (buffers->size() <= slot) buffers->resize(slot + 1);
  Tensor& buffer = (*buffers)[slot];
  // Page-locked memory is costly to make: one buffer per slot, made again only for a batch of
  // another size (the last one of an epoch).
  if (!buffer.defined() || buffer.shape() != shape)
    buffer = Tensor::empty(std::move(shape), source.dtype()).pin_memory(*options_.pin_for);
  return buffer;
}

}  // namespace dprun::cli
