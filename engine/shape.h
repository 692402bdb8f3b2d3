#pragma once
// Concrete shapes (vectors of sizes) and the symbolic shapes a model declares.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/dtype.h"

namespace dprun {

/// A concrete shape: one size per dimension; {} is a scalar.
using Shape = std::vector<int64_t>;

/// Number of elements of a shape (1 for a scalar). Throws on a negative size or overflow.
int64_t shape_numel(const Shape& shape);
/// "[2, 3, 4]"
std::string shape_to_string(const Shape& shape);
/// Normalises a possibly negative axis into [0, rank); throws naming the axis otherwise.
int64_t normalize_axis(int64_t axis, int64_t rank);
/// numpy broadcasting of two shapes; throws when they are incompatible.
Shape broadcast_shapes(const Shape& a, const Shape& b);

/// One dimension of a declared shape: a known size, a named symbol (dim_param), or unknown.
struct Dim {
  int64_t value = -1;  // >= 0 when known
  std::string symbol;  // non-empty for a named symbolic dim
  bool is_known() const { return value >= 0; }
  static Dim known(int64_t v) { return Dim{v, {}}; }
  static Dim named(std::string s) { return Dim{-1, std::move(s)}; }
};

using SymbolicShape = std::vector<Dim>;
/// "[batch, 3, 224, 224]" with "?" for unknown dims.
std::string shape_to_string(const SymbolicShape& shape);

/// The declared type of a value: dtype and, when known, a (possibly symbolic) shape.
struct TensorType {
  DType dtype = DType::Undefined;
  std::optional<SymbolicShape> shape;
  std::string to_string() const;
};

}  // namespace dprun
