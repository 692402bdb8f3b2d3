// Reshape, Flatten, Squeeze, Unsqueeze: new shapes over the same storage (no copy); the kernels,
// shared by every device, are in ops/array/view_kernels.cpp.
#include "engine/autograd/shape_rules.h"
#include "engine/op_facts.h"
#include "ops/array/view_kernels.h"

namespace dprun {
namespace {

DPRUN_REGISTER_KERNEL({.op_type = "Reshape", .since = 1, .factory = make_kernel<ReshapeKernel>});
DPRUN_REGISTER_KERNEL({.op_type = "Flatten", .since = 1, .factory = make_kernel<FlattenKernel>});
DPRUN_REGISTER_KERNEL({.op_type = "Squeeze", .since = 1, .factory = make_kernel<SqueezeKernel>});
DPRUN_REGISTER_KERNEL({.op_type = "Unsqueeze",
                       .since = 1,
                       .factory = make_kernel<UnsqueezeKernel>});

}  // namespace
}  // namespace dprun

// The ops' facts (engine/op_facts.h): output types, shapes, 16-bit and layout policy.
namespace dprun {
namespace {

// The target shape where it is a constant (0 copies the input's dim unless allowzero, -1 is
// unknown); else only its length, the rank.
std::optional<SymbolicShape> reshape_shape(const ShapeQuery& q) {
  if (q.output != 0) return std::nullopt;
  std::optional<std::vector<int64_t>> target = q.ints_from(1, "shape");
  if (!target) {
    auto rank = q.length_of(1);
    return rank ? std::optional<SymbolicShape>(unknown_dims(static_cast<size_t>(*rank)))
                : std::nullopt;
  }
  auto x = q.input(0);
  bool allow_zero = q.node.attr_int("allowzero", 0) != 0;
  SymbolicShape out;
  for (size_t i = 0; i < target->size(); ++i) {
    int64_t v = (*target)[i];
    if (v == 0 && !allow_zero)
      out.push_back(x && i < x->size() ? (*x)[i] : Dim{});
    else if (v < 0)
      out.push_back(Dim{});
    else
      out.push_back(Dim::known(v));
  }
  return out;
}

// 2-D: the products of the dims before and from `axis`.
std::optional<SymbolicShape> flatten_shape(const ShapeQuery& q) {
  if (q.output != 0) return std::nullopt;
  auto x = q.input(0);
  if (!x) return SymbolicShape(2);
  int64_t rank = static_cast<int64_t>(x->size());
  int64_t axis = q.node.attr_int("axis", 1);
  if (axis < 0) axis += rank;
  if (axis < 0 || axis > rank) return std::nullopt;
  return SymbolicShape{product(*x, 0, static_cast<size_t>(axis)),
                       product(*x, static_cast<size_t>(axis), x->size())};
}

std::optional<SymbolicShape> unsqueeze_shape(const ShapeQuery& q) {
  if (q.output != 0) return std::nullopt;
  auto x = q.input(0);
  auto axes = q.ints_from(1, "axes");
  if (!x || !axes) return std::nullopt;
  int64_t rank = static_cast<int64_t>(x->size() + axes->size());
  std::vector<bool> inserted(static_cast<size_t>(rank), false);
  for (int64_t a : *axes) {
    auto n = axis_in(a, rank);
    if (!n) return std::nullopt;
    inserted[static_cast<size_t>(*n)] = true;
  }
  SymbolicShape out;
  size_t next = 0;
  for (int64_t i = 0; i < rank; ++i) {
    if (inserted[static_cast<size_t>(i)])
      out.push_back(Dim::known(1));
    else if (next < x->size())
      out.push_back((*x)[next++]);
    else
      return std::nullopt;
  }
  return out;
}

// Without axes, every dim known to be 1 goes; an unknown dim may be 1, so then nothing is told.
std::optional<SymbolicShape> squeeze_shape(const ShapeQuery& q) {
  if (q.output != 0) return std::nullopt;
  auto x = q.input(0);
  if (!x) return std::nullopt;
  bool axes_input = q.node.inputs.size() > 1 && !q.node.inputs[1].empty();
  auto axes = q.ints_from(1, "axes");
  if (axes_input && !axes) return std::nullopt;
  int64_t rank = static_cast<int64_t>(x->size());
  std::vector<bool> removed(x->size(), false);
  if (!axes || axes->empty()) {
    for (size_t i = 0; i < x->size(); ++i) {
      if (!(*x)[i].is_known()) return std::nullopt;
      removed[i] = (*x)[i].value == 1;
    }
  } else {
    for (int64_t a : *axes) {
      auto n = axis_in(a, rank);
      if (!n) return std::nullopt;
      removed[static_cast<size_t>(*n)] = true;
    }
  }
  SymbolicShape out;
  for (size_t i = 0; i < x->size(); ++i)
    if (!removed[i]) out.push_back((*x)[i]);
  return out;
}

DPRUN_REGISTER_OP_FACTS({.op_type = "Flatten", .shape_rule = flatten_shape, .keeps_values = true});
DPRUN_REGISTER_OP_FACTS({.op_type = "Reshape", .shape_rule = reshape_shape, .keeps_values = true});
DPRUN_REGISTER_OP_FACTS({.op_type = "Squeeze", .shape_rule = squeeze_shape, .keeps_values = true});
DPRUN_REGISTER_OP_FACTS({.op_type = "Unsqueeze",
                         .shape_rule = unsqueeze_shape,
                         .keeps_values = true});

}  // namespace
}  // namespace dprun
