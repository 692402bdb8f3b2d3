#include "engine/training/data_checks.h"

#include <cmath>

namespace dprun {

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

void check_finite_rows(const Tensor& t, int64_t dim, const std::string& source, int64_t first_row) {
  if (!is_floating(t.dtype()) || t.numel() == 0) return;
  if (t.dtype() == DType::Float32) {  // most data: one pass in memory order finds nothing
    const float* v = t.data<float>();
    bool finite = true;
    for (int64_t k = 0; k < t.numel(); ++k) finite &= std::isfinite(v[k]);
    if (finite) return;
  }
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
          fail(source, ": row ", first_row + r, " holds ", *what,
               ": training needs finite numbers");
}

void check_class_labels(const Tensor& target, const ClassLabels& labels, const std::string& source,
                        int64_t first_row) {
  if (target.dtype() != DType::Int64 || target.numel() == 0 || target.rank() < 1) return;
  const int64_t per_row = target.numel() / target.dim(0);
  const int64_t* v = target.data<int64_t>();
  for (int64_t k = 0; k < target.numel(); ++k) {
    if ((v[k] >= 0 && v[k] < labels.classes) || v[k] == labels.ignore_index) continue;
    const std::string ignored =
        labels.ignore_index
            ? detail::concat(" and is not the --ignore-index ", *labels.ignore_index)
            : std::string();
    fail(source, ": row ", first_row + k / per_row, " holds class ", v[k], ", outside [0, ",
         labels.classes, ") of output '", labels.output, "'", ignored);
  }
}

}  // namespace dprun
