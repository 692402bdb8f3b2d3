#include "engine/training/training_data.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>

#include "engine/mapped_file.h"
#include "engine/training/distributed_data_parallel.h"
#include "engine/training/sample_transform.h"

namespace dprun {

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

// Gives back the pages of rows `indices` (along dim 0) of `t`, a view of a file's pages.
void release_rows(const Tensor& t, const std::vector<int64_t>& indices) {
  const size_t row_bytes = t.nbytes() / static_cast<size_t>(std::max<int64_t>(1, t.dim(0)));
  const char* data = static_cast<const char*>(t.raw_data());
  for (int64_t r : indices)
    release_mapped_pages(data + static_cast<size_t>(r) * row_bytes, row_bytes);
}

}  // namespace

int64_t rows_along(const Tensor& t, int64_t dim, const std::string& what) {
  return t.dim(resolve_dim(t, dim, what));
}

void check_input_rows(const std::string& name, int64_t rows, const std::string& first,
                      int64_t first_rows, int64_t dim) {
  DPRUN_CHECK(rows == first_rows, "input '", name, "' has ", rows, " rows along dim ", dim,
              " but input '", first, "' has ", first_rows);
}

void check_target_rows(const Tensor& target, const std::string& first, int64_t first_rows) {
  DPRUN_CHECK(target.dim(0) == first_rows, "the target has ", target.dim(0), " rows but input '",
              first, "' has ", first_rows);
}

TrainingData::TrainingData(const std::vector<std::string>& input_names, std::vector<Tensor> inputs,
                           Tensor target, const TrainingDataOptions& options)
    : options_(options), inputs_(std::move(inputs)), target_(std::move(target)) {
  DPRUN_CHECK(input_names.size() == inputs_.size(), "training data: ", inputs_.size(),
              " input tensors for ", input_names.size(), " input names");
  DPRUN_CHECK(options_.batch >= 1, "training data: the batch size is ", options_.batch,
              "; it must be at least 1");
  for (size_t i = 0; i < inputs_.size(); ++i) {
    const int64_t n = rows_along(inputs_[i], options_.dim, "input '" + input_names[i] + "'");
    if (i == 0) rows_ = n;
    check_input_rows(input_names[i], n, input_names[0], rows_, options_.dim);
  }
  if (target_.defined()) {
    DPRUN_CHECK(target_.rank() >= 1, "the target is a 0-d tensor; it needs one row per sample");
    check_target_rows(target_, input_names.empty() ? "" : input_names[0], rows_);
  }
  DPRUN_CHECK(rows_ > 0, "the training data has no rows");
  transforms_.resize(inputs_.size());
  transformed_shapes_.resize(inputs_.size());
  for (const auto& [name, transform] : options_.transforms) {
    const auto it = std::find(input_names.begin(), input_names.end(), name);
    const char* option = !transform.augment.empty() ? "--augment"
                         : !transform.mean.empty()  ? "--normalize"
                                                    : "--layout";
    DPRUN_CHECK(it != input_names.end(), option, " names '", name,
                "', which is not an input of the model");
    if (transform.empty()) continue;
    DPRUN_CHECK(options_.dim == 0, option, " ", name, ": transforms take rows along dim 0, not ",
                options_.dim);
    const auto i = static_cast<size_t>(it - input_names.begin());
    const Shape stored(inputs_[i].shape().begin() + 1, inputs_[i].shape().end());
    transformed_shapes_[i] = transformed_sample_shape(name, transform, stored, inputs_[i].dtype());
    transforms_[i] = transform;
  }
}

Shape TrainingData::sample_shape(size_t i) const {
  if (transforms_[i]) return transformed_shapes_[i];
  return Shape(inputs_[i].shape().begin() + 1, inputs_[i].shape().end());
}

void TrainingData::transform_rows(size_t i, int64_t epoch, const std::vector<int64_t>& rows,
                                  Tensor& out) const {
  const Tensor& source = inputs_[i];
  const Shape stored(source.shape().begin() + 1, source.shape().end());
  const size_t row_bytes = static_cast<size_t>(shape_numel(stored)) * dtype_size(source.dtype());
  const auto sample = static_cast<size_t>(shape_numel(transformed_shapes_[i]));
  const char* src = static_cast<const char*>(source.raw_data());
  float* dst = out.data<float>();
  for (size_t k = 0; k < rows.size(); ++k)
    transform_sample(*transforms_[i], src + static_cast<size_t>(rows[k]) * row_bytes,
                     source.dtype(), stored,
                     {.seed = options_.seed,
                      .epoch = epoch,
                      .index = rows[k],
                      .evaluation = options_.evaluation},
                     dst + k * sample);
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
  // Rows in file order, one run of them (no shuffling, one rank), need no gathering: an input
  // without a transform is then the data's own rows, a view where they are contiguous in memory
  // (Tensor::narrow). Not for files whose pages are released once their rows are gathered.
  const bool one_run =
      !buffers && !options_.release_rows &&
      std::adjacent_find(rows.begin(), rows.end(),
                         [](int64_t a, int64_t b) { return b != a + 1; }) == rows.end();
  const int64_t first = rows.front(), count = b.rows;
  for (size_t i = 0; i < inputs_.size(); ++i) {
    if (transforms_[i]) {
      Shape shape = transformed_shapes_[i];
      shape.insert(shape.begin(), static_cast<int64_t>(rows.size()));
      b.inputs.push_back(destination(buffers, i, std::move(shape), DType::Float32));
      transform_rows(i, epoch, rows, b.inputs.back());
      continue;
    }
    if (one_run) {
      b.inputs.push_back(inputs_[i].narrow(resolve_dim(inputs_[i], options_.dim, "an input"),
                                           first, count));
      continue;
    }
    b.inputs.push_back(destination(buffers, i, rows_shape(inputs_[i], options_.dim, rows.size()),
                                   inputs_[i].dtype()));
    copy_rows(inputs_[i], options_.dim, rows, b.inputs.back());
  }
  if (target_.defined() && one_run) {
    b.target = target_.narrow(0, first, count);
  } else if (target_.defined()) {
    b.target =
        destination(buffers, inputs_.size(), rows_shape(target_, 0, rows.size()), target_.dtype());
    copy_rows(target_, 0, rows, b.target);
  }
  if (options_.release_rows && options_.dim == 0) {
    for (const Tensor& t : inputs_) release_rows(t, rows);
    if (target_.defined()) release_rows(target_, rows);
  }
  return b;
}

Tensor TrainingData::destination(std::vector<Tensor>* buffers, size_t slot, Shape shape,
                                 DType dtype) {
  DPRUN_CHECK(dtype != DType::String, "string tensors cannot be batched for training");
  if (!buffers) return Tensor::empty(std::move(shape), dtype);
  if (buffers->size() <= slot) buffers->resize(slot + 1);
  Tensor& buffer = (*buffers)[slot];
  // Page-locked memory is costly to make: one buffer per slot, made again only for a batch of
  // another size (the last one of an epoch).
  if (!buffer.defined() || buffer.shape() != shape)
    buffer = Tensor::empty(std::move(shape), dtype).pin_memory(*options_.pin_for);
  return buffer;
}

}  // namespace dprun
