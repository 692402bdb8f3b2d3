#include "engine/autograd/shape_rules.h"

namespace dprun {

std::optional<SymbolicShape> ShapeQuery::input(size_t i) const {
  if (i >= node.inputs.size() || node.inputs[i].empty()) return std::nullopt;
  return source.shape(node.inputs[i]);
}

std::optional<Tensor> ShapeQuery::constant(size_t i) const {
  if (i >= node.inputs.size() || node.inputs[i].empty()) return std::nullopt;
  return source.constant(node.inputs[i]);
}

std::optional<std::vector<int64_t>> ShapeQuery::ints_from(size_t i, const std::string& attr) const {
  if (node.has_attr(attr)) return node.attr_ints(attr);
  auto c = constant(i);
  if (!c) return std::nullopt;
  std::vector<int64_t> v;
  for (int64_t k = 0; k < c->numel(); ++k) v.push_back(static_cast<int64_t>(c->item_as_double(k)));
  return v;
}

std::optional<int64_t> ShapeQuery::length_of(size_t i) const {
  if (auto c = constant(i); c && c->rank() == 1) return c->numel();
  auto s = input(i);
  if (!s || s->size() != 1 || !(*s)[0].is_known()) return std::nullopt;
  return (*s)[0].value;
}

std::optional<int64_t> axis_in(int64_t axis, int64_t rank) {
  int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= rank) return std::nullopt;
  return a;
}

SymbolicShape unknown_dims(size_t rank) {
  return SymbolicShape(rank);
}

Dim product(const SymbolicShape& s, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t i = begin; i < end; ++i) {
    if (!s[i].is_known()) return Dim{};
    p *= s[i].value;
  }
  return Dim::known(p);
}

SymbolicShape from_dims(const Shape& dims) {
  SymbolicShape s;
  for (int64_t d : dims) s.push_back(Dim::known(d));
  return s;
}

SymbolicShape dims_in(const Tensor& values) {
  SymbolicShape dims;
  for (int64_t k = 0; k < values.numel(); ++k)
    dims.push_back(Dim::known(static_cast<int64_t>(values.item_as_double(k))));
  return dims;
}

}  // namespace dprun
