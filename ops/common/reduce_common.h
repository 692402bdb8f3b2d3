#pragma once
// Helpers shared by the reduction, normalization and sorting kernels of every device: reading
// integer list inputs, normalizing axis lists, and converting 16-bit floats to a wider compute
// type. The CPU's vectorised moments are in ops/normalization/norm_loops.h.
#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <utility>
#include <vector>

#include "engine/kernel.h"

namespace dprun {

template <class T>
inline constexpr bool is_half_v = std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>;

/// The type arithmetic happens in for element type T: float for 16-bit floats, T otherwise.
template <class T>
using compute_t = std::conditional_t<is_half_v<T>, float, T>;

/// Converts an element to a compute type (16-bit floats go through float).
template <class A, class T>
inline A load_as(T v) {
  if constexpr (is_half_v<T>)
    return static_cast<A>(static_cast<float>(v));
  else
    return static_cast<A>(v);
}

/// Converts a computed value back to the element type.
template <class T, class A>
inline T store_as(A v) {
  if constexpr (is_half_v<T>)
    return T(static_cast<float>(v));
  else
    return static_cast<T>(v);
}

/// The values of an int32/int64 tensor (e.g. an `axes` or `k` input) as int64.
inline std::vector<int64_t> read_int_list(const KernelContext& ctx, const Tensor& t,
                                          const char* what) {
  std::vector<int64_t> out(static_cast<size_t>(t.numel()));
  if (t.dtype() == DType::Int64) {
    const int64_t* p = t.data<int64_t>();
    std::copy(p, p + t.numel(), out.begin());
  } else if (t.dtype() == DType::Int32) {
    const int32_t* p = t.data<int32_t>();
    std::copy(p, p + t.numel(), out.begin());
  } else {
    ctx.fail(what, " must be int32 or int64, got ", dtype_name(t.dtype()));
  }
  return out;
}

/// A single integer from a scalar or one-element int32/int64 tensor.
inline int64_t read_int_scalar(const KernelContext& ctx, const Tensor& t, const char* what) {
  if (t.numel() != 1)
    ctx.fail(what, " must hold exactly one value, got shape ", shape_to_string(t.shape()));
  return read_int_list(ctx, t, what)[0];
}

/// Normalizes possibly negative axes against `rank`; throws on out-of-range or repeated axes.
/// Returns the axes sorted ascending.
inline std::vector<int64_t> normalize_axes(const Node& node, std::vector<int64_t> axes,
                                           int64_t rank) {
  for (auto& a : axes) {
    if (a < -rank || a >= rank) node.fail("axis ", a, " is out of range for rank ", rank);
    if (a < 0) a += rank;
  }
  std::sort(axes.begin(), axes.end());
  if (std::adjacent_find(axes.begin(), axes.end()) != axes.end())
    node.fail("axes contain a repeated axis");
  return axes;
}

/// Product of shape[begin, end).
inline int64_t dims_product(const Shape& shape, int64_t begin, int64_t end) {
  int64_t p = 1;
  for (int64_t i = begin; i < end; ++i) p *= shape[static_cast<size_t>(i)];
  return p;
}

/// A small parameter tensor (scale, bias, statistics) converted element-wise to C.
template <class C>
std::vector<C> read_as(const KernelContext& ctx, const Tensor& t, const char* what) {
  std::vector<C> out(static_cast<size_t>(t.numel()));
  auto conv = [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool>) {
      ctx.fail(what, " must be numeric, got bool");
    } else {
      const T* p = t.data<T>();
      for (size_t i = 0; i < out.size(); ++i) out[i] = load_as<C>(p[i]);
    }
  };
  visit_dtype(t.dtype(), conv);
  return out;
}

/// Fails unless `param` has exactly `count` elements (a per-channel parameter vector).
inline void check_param_size(const KernelContext& ctx, const Tensor& param, int64_t count,
                             const char* what, const Shape& x_shape) {
  if (param.numel() != count)
    ctx.fail(what, " must have ", count, " elements for input shape ", shape_to_string(x_shape),
             ", got shape ", shape_to_string(param.shape()));
}

/// Calls f(T{}) with T the C++ type of `t` when it is a floating type (float, double, Float16,
/// BFloat16); otherwise fails through ctx with the message parts `why...`, so each kernel keeps
/// its own wording (tests assert it) while the dispatch itself is visit_dtype_among's.
template <class F, class... Why>
void visit_floating_dtype(const KernelContext& ctx, DType t, F&& f, const Why&... why) {
  if (!is_floating(t)) ctx.fail(why...);
  visit_dtype_among<float, double, Float16, BFloat16>(t, std::forward<F>(f));
}

/// Dispatches f(T{}) over the floating types (including 16-bit ones); fails otherwise.
template <class F>
void visit_float_dtype(const KernelContext& ctx, DType t, F&& f) {
  visit_floating_dtype(ctx, t, std::forward<F>(f), "input dtype ", dtype_name(t),
                       " is not supported (floating types only)");
}

}  // namespace dprun
