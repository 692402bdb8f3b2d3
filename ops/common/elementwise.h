#pragma once
// What the elementwise kernels of every device share: dtype policies, value conversion, and
// broadcasting's rules and plan. The plan coalesces dimensions so the innermost loop always runs
// over a contiguous or constant run of each input (equal shapes, scalars, row and channel
// broadcasts all become tight, vectorisable loops). The CPU's maps and kernel classes are in
// ops/cpu/elementwise.h.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "engine/half.h"
#include "engine/kernel.h"
#include "ops/common/broadcast.h"

namespace dprun::ew {

template <class T>
inline constexpr bool is_half_v = std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>;

/// The arithmetic type a storage type computes in (16-bit floats compute in float).
template <class T>
using compute_t = std::conditional_t<is_half_v<T>, float, T>;

/// Which element types a kernel accepts.
enum class Types {
  Float,     // float32/64, float16, bfloat16
  Signed,    // Float + signed integers
  Numeric,   // Float + all integers
  Integral,  // all integers
  Unsigned,  // unsigned integers
  Bool,      // bool only
  Any,       // everything storable
};

template <Types kT, class T>
constexpr bool accepts() {
  constexpr bool is_bool = std::is_same_v<T, bool>;
  constexpr bool is_float = std::is_floating_point_v<T> || is_half_v<T>;
  constexpr bool is_int = std::is_integral_v<T> && !is_bool;
  switch (kT) {
    case Types::Float:
      return is_float;
    case Types::Signed:
      return is_float || (is_int && std::is_signed_v<T>);
    case Types::Numeric:
      return is_float || is_int;
    case Types::Integral:
      return is_int;
    case Types::Unsigned:
      return is_int && std::is_unsigned_v<T>;
    case Types::Bool:
      return is_bool;
    case Types::Any:
      return true;
  }
  return false;
}

[[noreturn]] inline void fail_dtype(const KernelContext& ctx, DType t) {
  ctx.fail("input dtype ", dtype_name(t), " is not supported by this operator");
}

/// Converts one value between storage types the way Cast does: 16-bit floats go through
/// float, float -> integer truncates toward zero and saturates (NaN becomes 0) so
/// out-of-range values never invoke undefined behaviour, anything -> bool tests != 0.
template <class To, class From>
inline To convert(From v) {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (is_half_v<From>) {
    return convert<To>(static_cast<float>(v));
  } else if constexpr (is_half_v<To>) {
    return To(static_cast<float>(v));
  } else if constexpr (std::is_same_v<To, bool>) {
    return v != From(0);
  } else if constexpr (std::is_integral_v<To> && std::is_floating_point_v<From>) {
    if (std::isnan(v)) return To(0);
    // Compare in From's domain; the bounds are exact powers of two, safe to represent.
    constexpr From lo = static_cast<From>(std::numeric_limits<To>::lowest());
    constexpr From hi = static_cast<From>(std::numeric_limits<To>::max());
    if (v <= lo) return std::numeric_limits<To>::lowest();
    if (v >= hi) return std::numeric_limits<To>::max();
    return static_cast<To>(v);
  } else {
    return static_cast<To>(v);
  }
}

/// A broadcast of N inputs to an output shape with adjacent compatible dims merged. The last
/// dim is the inner run; each input's stride along it is 1 or 0.
template <size_t N>
struct BroadcastPlan {
  std::vector<int64_t> dims;
  std::array<std::vector<int64_t>, N> strides;
  int64_t total = 0;
};

template <size_t N>
BroadcastPlan<N> make_plan(const Shape& out, const std::array<const Shape*, N>& ins) {
  const size_t rank = out.size();
  BroadcastPlan<N> plan;
  plan.total = shape_numel(out);
  std::array<std::vector<int64_t>, N> full;
  for (size_t k = 0; k < N; ++k) {
    const Shape& s = *ins[k];
    DPRUN_CHECK(s.size() <= rank, "cannot broadcast ", shape_to_string(s), " to ",
                shape_to_string(out));
    for (size_t i = 0; i < s.size(); ++i) {
      int64_t o = out[rank - s.size() + i];
      DPRUN_CHECK(s[i] == o || s[i] == 1, "cannot broadcast ", shape_to_string(s), " to ",
                  shape_to_string(out));
    }
    full[k] = broadcast_strides(s, rank);
  }
  for (size_t d = 0; d < rank; ++d) {
    if (out[d] == 1) continue;
    bool merge = !plan.dims.empty();
    for (size_t k = 0; k < N && merge; ++k) merge = plan.strides[k].back() == full[k][d] * out[d];
    if (merge) {
      plan.dims.back() *= out[d];
      for (size_t k = 0; k < N; ++k) plan.strides[k].back() = full[k][d];
    } else {
      plan.dims.push_back(out[d]);
      for (size_t k = 0; k < N; ++k) plan.strides[k].push_back(full[k][d]);
    }
  }
  if (plan.dims.empty()) {  // every dim is 1: a single element
    plan.dims.push_back(1);
    for (size_t k = 0; k < N; ++k) plan.strides[k].push_back(0);
  }
  return plan;
}

/// True when `s` broadcasts to `out` (numpy rules, unidirectional).
inline bool broadcasts_to(const Shape& s, const Shape& out) {
  if (s.size() > out.size()) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    int64_t o = out[out.size() - s.size() + i];
    if (s[i] != o && s[i] != 1) return false;
  }
  return true;
}

/// numpy broadcast of several shapes, failing with the node's name when incompatible.
inline Shape broadcast_all(const KernelContext& ctx, const std::vector<const Shape*>& shapes) {
  Shape out;
  for (const Shape* s : shapes) {
    const size_t rank = std::max(out.size(), s->size());
    Shape next(rank, 1);
    for (size_t i = 0; i < rank; ++i) {
      int64_t x = i + out.size() >= rank ? out[i + out.size() - rank] : 1;
      int64_t y = i + s->size() >= rank ? (*s)[i + s->size() - rank] : 1;
      if (x != y && x != 1 && y != 1) {
        std::string all;
        for (const Shape* t : shapes) all += (all.empty() ? "" : " and ") + shape_to_string(*t);
        ctx.fail("shapes ", all, " cannot be broadcast together");
      }
      next[i] = x == 1 ? y : x;
    }
    out = std::move(next);
  }
  return out;
}

/// Where's input rules: a bool condition, X and Y of one dtype.
inline void check_where_inputs(const KernelContext& ctx, const Tensor& cond, const Tensor& x,
                               const Tensor& y) {
  if (cond.dtype() != DType::Bool)
    ctx.fail("condition must be bool, got ", dtype_name(cond.dtype()));
  if (x.dtype() != y.dtype())
    ctx.fail("X is ", dtype_name(x.dtype()), " but Y is ", dtype_name(y.dtype()));
}

/// Binary ops before opset 7 broadcast only when broadcast=1, aligning B's dims to A's
/// starting at `axis` (default: trailing alignment). Returns B's shape extended to A's rank.
inline Shape legacy_aligned_shape(const KernelContext& ctx, const Shape& a, const Shape& b) {
  const Node& node = ctx.node();
  if (node.attr_int("broadcast", 0) == 0) {
    if (a != b)
      ctx.fail("shapes ", shape_to_string(a), " and ", shape_to_string(b),
               " differ and broadcast is not enabled");
    return b;
  }
  const int64_t ra = static_cast<int64_t>(a.size()), rb = static_cast<int64_t>(b.size());
  if (rb > ra)
    ctx.fail("B of shape ", shape_to_string(b), " has more dims than A of shape ",
             shape_to_string(a));
  int64_t axis = ra - rb;
  if (node.has_attr("axis")) {
    axis = node.attr_int("axis");
    if (axis < 0) axis += ra;
    if (axis < 0 || axis + rb > ra)
      ctx.fail("axis ", node.attr_int("axis"), " does not fit B of shape ", shape_to_string(b),
               " into A of shape ", shape_to_string(a));
  }
  Shape s(static_cast<size_t>(ra), 1);
  for (int64_t i = 0; i < rb; ++i) s[static_cast<size_t>(axis + i)] = b[static_cast<size_t>(i)];
  if (!broadcasts_to(s, a))
    ctx.fail("B of shape ", shape_to_string(b), " at axis ", axis,
             " does not broadcast to A of shape ", shape_to_string(a));
  return s;
}

/// B reshaped as legacy_aligned_shape says.
inline Tensor legacy_align(const KernelContext& ctx, const Tensor& a, const Tensor& b) {
  Shape s = legacy_aligned_shape(ctx, a.shape(), b.shape());
  return s == b.shape() ? b : b.reshape(std::move(s));
}

}  // namespace dprun::ew
