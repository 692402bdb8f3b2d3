// Expand and Tile, both expressed as strided copies with zero strides over repeated dims
// (the views come from ops/array/expand_tile.h).
#include "ops/array/expand_tile.h"

#include <algorithm>

#include "engine/autograd/shape_rules.h"
#include "engine/op_facts.h"
#include "ops/cpu/data_movement.h"

namespace dprun {
namespace {

DPRUN_REGISTER_KERNEL({.op_type = "Expand",
                       .since = 8,
                       .factory = make_kernel<ViewCopyKernel<ExpandParams, cpu_view_copy>>});
DPRUN_REGISTER_KERNEL({.op_type = "Tile",
                       .since = 1,
                       .factory = make_kernel<ViewCopyKernel<TileParams, cpu_view_copy>>});

}  // namespace
}  // namespace dprun

// The ops' facts (engine/op_facts.h): output types, shapes, 16-bit and layout policy.
namespace dprun {
namespace {

// Input 0 broadcast with the target shape where it is a constant; else its rank.
std::optional<SymbolicShape> expand_shape(const ShapeQuery& q) {
  if (q.output != 0) return std::nullopt;
  auto x = q.input(0);
  if (!x) return std::nullopt;
  if (auto c = q.constant(1)) {
    SymbolicShape target = dims_in(*c);
    if (auto out = broadcast_symbolic(*x, target)) return out;
    return unknown_dims(std::max(x->size(), target.size()));
  }
  auto length = q.length_of(1);
  if (!length) return std::nullopt;
  return unknown_dims(std::max(x->size(), static_cast<size_t>(*length)));
}

DPRUN_REGISTER_OP_FACTS({.op_type = "Expand", .shape_rule = expand_shape, .keeps_values = true});
DPRUN_REGISTER_OP_FACTS({.op_type = "Tile", .shape = ShapeKind::SameRank});

}  // namespace
}  // namespace dprun
