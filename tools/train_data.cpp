#include "tools/train_data.h"

#include <cmath>
#include <cstring>
#include <filesystem>
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
    check_not_directory(it->second, options_.option_prefix + "input");
    Tensor t = read_npy(it->second);
    check_finite_rows(t, options_.dim, it->second);
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
    check_not_directory(options_.target_file, options_.option_prefix + "target");
    target_ = read_npy(options_.target_file);
    check_finite_rows(target_, 0, options_.target_file);
    if (options_.labels) check_class_labels(target_, *options_.labels, options_.target_file);
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

namespace {

// "NaN", "inf" or "-inf" for a value that is not finite, else nullopt. 16-bit floats are read
// from their bits: all-ones exponent, then the mantissa tells NaN from infinity.
std::optional<std::string> non_finite_name(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return std::nullopt;
}

std::optional<std::string> non_finite_half(uint16_t bits, uint16_t exponent) {
  if ((bits & exponent) != exponent) return std::nullopt;
  if ((bits & static_cast<uint16_t>(~exponent & 0x7fff)) != 0) return "NaN";
  return (bits & 0x8000) ? "-inf" : "inf";
}

// What element `k` of `t` (a floating-point tensor) holds when it is not finite.
std::optional<std::string> non_finite_at(const Tensor& t, int64_t k) {
  switch (t.dtype()) {
    case DType::Float32:
      return non_finite_name(t.data<float>()[k]);
    case DType::Float64:
      return non_finite_name(t.data<double>()[k]);
    case DType::Float16:
      return non_finite_half(static_cast<const uint16_t*>(t.raw_data())[k], 0x7c00);
    case DType::BFloat16:
      return non_finite_half(static_cast<const uint16_t*>(t.raw_data())[k], 0x7f80);
    default:
      return std::nullopt;
  }
}

}  // namespace

std::optional<ClassLabels> class_labels(const Model& model, const LossSpec& loss) {
  if (loss.kind != LossKind::CrossEntropy && loss.kind != LossKind::Nll) return std::nullopt;
  const Graph& graph = model.graph();
  if (graph.outputs.empty()) return std::nullopt;
  const std::string output = loss.output.empty() ? graph.outputs[0].name : loss.output;
  const std::optional<TensorType> type = graph.type_of(output);
  if (!type || !type->shape) return std::nullopt;
  const auto rank = static_cast<int64_t>(type->shape->size());
  const int64_t c = loss.class_dim < 0 ? loss.class_dim + rank : loss.class_dim;
  if (c < 1 || c >= rank) return std::nullopt;  // the loss names the bad class dim itself
  const Dim& classes = (*type->shape)[static_cast<size_t>(c)];
  if (!classes.is_known()) return std::nullopt;
  return ClassLabels{.classes = classes.value, .ignore_index = loss.ignore_index, .output = output};
}

void check_not_directory(const std::string& path, const std::string& option) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    fail(path, ": is a directory; --", option, " takes a .npy file");
}

void check_finite_rows(const Tensor& t, int64_t dim, const std::string& path) {
  if (!is_floating(t.dtype()) || t.numel() == 0) return;
  const int64_t d = dim < 0 ? dim + t.rank() : dim;
  if (d < 0 || d >= t.rank()) return;  // the data's own check names a bad dim
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < d; ++i) outer *= t.dim(i);
  for (int64_t i = d + 1; i < t.rank(); ++i) inner *= t.dim(i);
  const int64_t rows = t.dim(d);
  // Row by row, so that the first value found is in the lowest row.
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t k = (o * rows + r) * inner, end = k + inner; k < end; ++k)
        if (std::optional<std::string> what = non_finite_at(t, k))
          fail(path, ": row ", r, " holds ", *what, ": training needs finite numbers");
}

void check_class_labels(const Tensor& target, const ClassLabels& labels, const std::string& path) {
  if (target.dtype() != DType::Int64 || target.numel() == 0 || target.rank() < 1) return;
  const int64_t per_row = target.numel() / target.dim(0);
  const int64_t* v = target.data<int64_t>();
  for (int64_t k = 0; k < target.numel(); ++k) {
    if ((v[k] >= 0 && v[k] < labels.classes) || v[k] == labels.ignore_index) continue;
    const std::string ignored =
        labels.ignore_index
            ? detail::concat(" and is not the --ignore-index ", *labels.ignore_index)
            : std::string();
    fail(path, ": row ", k / per_row, " holds class ", v[k], ", outside [0, ", labels.classes,
         ") of output '", labels.output, "'", ignored);
  }
}

}  // namespace dprun::cli
