#include "engine/shape.h"

#include <algorithm>
#include <limits>
#include <sstream>

namespace dprun {

int64_t shape_numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    DPRUN_CHECK(d >= 0, "negative dimension in shape ", shape_to_string(shape));
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / d)
      fail("shape ", shape_to_string(shape), " has too many elements");
    n *= d;
  }
  return n;
}

std::string shape_to_string(const Shape& shape) {
  std::ostringstream out;
  out << '[';
  for (size_t i = 0; i < shape.size(); ++i) out << (i ? ", " : "") << shape[i];
  out << ']';
  return out.str();
}

int64_t normalize_axis(int64_t axis, int64_t rank) {
  int64_t a = axis < 0 ? axis + rank : axis;
  DPRUN_CHECK(a >= 0 && a < std::max<int64_t>(rank, 1), "axis ", axis, " is out of range for rank ",
              rank);
  return a;
}

Shape broadcast_shapes(const Shape& a, const Shape& b) {
  size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1)
      fail("shapes ", shape_to_string(a), " and ", shape_to_string(b), " cannot be broadcast");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

std::string shape_to_string(const SymbolicShape& shape) {
  std::ostringstream out;
  out << '[';
  for (size_t i = 0; i < shape.size(); ++i) {
    out << (i ? ", " : "");
    if (shape[i].is_known())
      out << shape[i].value;
    else if (!shape[i].symbol.empty())
      out << shape[i].symbol;
    else
      out << '?';
  }
  out << ']';
  return out.str();
}

std::string TensorType::to_string() const {
  std::string s(dtype_name(dtype));
  s += shape ? shape_to_string(*shape) : std::string("[unknown rank]");
  return s;
}

}  // namespace dprun
