#pragma once
// Helpers shared by the shape and data-movement kernels of every device: reading small integer
// inputs (shapes, axes, pads), axis and index checks, strided views and their layouts. The CPU's
// copies of them are in ops/cpu/data_movement.h.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "engine/kernel.h"

namespace dprun {

/// Values of an integer tensor (any integer dtype) as int64, e.g. a shape or axes input.
/// A tensor in device memory (a GPU run's input) is first copied to the host, which waits for
/// the work that produces it.
inline std::vector<int64_t> read_int64_values(const Tensor& in, const KernelContext& ctx,
                                              const char* what) {
  if (!is_integral(in.dtype())) ctx.fail(what, " must be an integer tensor, got ", in.describe());
  const Tensor t = in.device().type == DeviceType::CPU ? in : in.to(Device::cpu());
  std::vector<int64_t> out(static_cast<size_t>(t.numel()));
  visit_dtype(t.dtype(), [&](auto zero) {
    using T = decltype(zero);
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      const T* p = t.data<T>();
      for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<int64_t>(p[i]);
    }
  });
  return out;
}

/// Reads a node's small integer inputs (shapes, axes, sizes, repeats) on the host. An input
/// that is a constant of the plan (an initializer callers cannot override) is read from the
/// copy the plan saw, so a kernel on a GPU does not wait for a copy of it from device memory;
/// any other input is read with read_int64_values.
class IntInputReader {
 public:
  explicit IntInputReader(const KernelInfo& info) : constants_(info.constant_inputs) {}
  /// Input i's values; no values when the input is absent.
  std::vector<int64_t> values(const KernelContext& ctx, size_t i, const char* what) const {
    const Tensor* t = find(ctx, i);
    return t ? read_int64_values(*t, ctx, what) : std::vector<int64_t>{};
  }
  /// Input i itself (its constant copy when it has one); throws naming the node when absent.
  const Tensor& tensor(const KernelContext& ctx, size_t i) const {
    const Tensor* t = find(ctx, i);
    return t ? *t : ctx.input(i);
  }

 private:
  const Tensor* find(const KernelContext& ctx, size_t i) const {
    if (auto it = constants_.find(i); it != constants_.end()) return &it->second;
    return ctx.optional_input(i);
  }
  std::map<size_t, Tensor> constants_;
};

/// A 1-element integer tensor (0-d or [1]) as int64.
inline int64_t read_int64_scalar(const Tensor& t, const KernelContext& ctx, const char* what) {
  if (t.numel() != 1) ctx.fail(what, " must hold exactly one value, got ", t.describe());
  return read_int64_values(t, ctx, what)[0];
}

/// Transpose's permutation for an input of rank `rank`: `perm` (negatives counted from the
/// end) or, when empty, the dimensions reversed. Fails unless it is a permutation of the dims.
inline std::vector<int64_t> transpose_perm(std::vector<int64_t> perm, size_t rank,
                                           const KernelContext& ctx) {
  if (perm.empty())
    for (size_t d = rank; d-- > 0;) perm.push_back(static_cast<int64_t>(d));
  if (perm.size() != rank)
    ctx.fail("perm ", shape_to_string(perm), " does not match input rank ", rank);
  std::vector<bool> seen(rank, false);
  const std::vector<int64_t> given = perm;
  for (int64_t& p : perm) {
    if (p < 0) p += static_cast<int64_t>(rank);
    if (p < 0 || p >= static_cast<int64_t>(rank) || seen[static_cast<size_t>(p)])
      ctx.fail("perm ", shape_to_string(given), " is not a permutation of rank ", rank);
    seen[static_cast<size_t>(p)] = true;
  }
  return perm;
}

/// A strided view of a contiguous tensor: element with multi-index (i_0..i_n) of `shape` is
/// element offset + sum i_k * strides[k] of the source (strides may be zero or negative).
struct StridedView {
  Shape shape;
  std::vector<int64_t> strides;
  int64_t offset = 0;
};

/// The output of a kernel that copies a strided view of its input 0 (Slice, Expand, Tile):
/// `out_shape`, filled with the elements of `view` in row-major order (the view may split
/// output dims in two, as Tile's does).
struct ViewCopy {
  Shape out_shape;
  StridedView view;
};

/// The kernel of such an op on any device: `Params` is built from the KernelInfo and gives the
/// ViewCopy with layout(ctx, input shape); `Copy(ctx, x, view, y)` copies the view of x into
/// the contiguous y on the node's device.
template <class Params,
          void (*Copy)(const KernelContext&, const Tensor&, const StridedView&, Tensor&)>
class ViewCopyKernel : public OpKernel {
 public:
  explicit ViewCopyKernel(const KernelInfo& info) : params_(info) {}
  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    const ViewCopy v = params_.layout(ctx, x.shape());
    Tensor& y = ctx.allocate_output(0, v.out_shape, x.dtype());
    Copy(ctx, x, v.view, y);
  }

 private:
  Params params_;
};

/// Axis attribute `axis` normalised for rank `rank` (negatives count from the end); fails
/// naming the node when out of range.
inline int64_t normalize_axis_attr(int64_t axis, int64_t rank, const KernelContext& ctx) {
  const int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= rank) ctx.fail("axis ", axis, " is out of range for rank ", rank);
  return a;
}

/// The products of the dims of `shape` before and after `axis`.
inline std::pair<int64_t, int64_t> outer_inner(const Shape& shape, size_t axis) {
  int64_t outer = 1, inner = 1;
  for (size_t d = 0; d < axis; ++d) outer *= shape[d];
  for (size_t d = axis + 1; d < shape.size(); ++d) inner *= shape[d];
  return {outer, inner};
}

/// Row-major element strides of a shape.
inline std::vector<int64_t> contiguous_strides(const Shape& shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;) strides[d - 1] = strides[d] * shape[d];
  return strides;
}

/// The view of a contiguous tensor of `shape` with its dims permuted by `perm` (validated):
/// output dim k walks input dim perm[k]. Copied, it is a Transpose; read
/// in place, a Transpose folded into its reader.
inline StridedView permuted_view(const Shape& shape, const std::vector<int64_t>& perm) {
  const std::vector<int64_t> in_strides = contiguous_strides(shape);
  StridedView view;
  for (int64_t p : perm) {
    view.shape.push_back(shape[static_cast<size_t>(p)]);
    view.strides.push_back(in_strides[static_cast<size_t>(p)]);
  }
  return view;
}

/// Calls f(U{}) with an unsigned integer type U of `size` bytes, so copies of any dtype become
/// plain integer moves.
template <class F>
decltype(auto) visit_element_size(size_t size, F&& f) {
  switch (size) {
    case 1:
      return f(uint8_t{});
    case 2:
      return f(uint16_t{});
    case 4:
      return f(uint32_t{});
    case 8:
      return f(uint64_t{});
    default:
      fail("unsupported element size ", size);
  }
}

/// Normalises an index into [0, size), accepting negatives counted from the end; throws with
/// context when out of range.
inline int64_t normalize_index(int64_t index, int64_t size, const KernelContext& ctx,
                               const char* what) {
  int64_t i = index < 0 ? index + size : index;
  if (i < 0 || i >= size)
    ctx.fail(what, " ", index, " is out of range for a dimension of size ", size);
  return i;
}

/// Reads an index tensor (int32 or int64) into int64, normalising negatives against `size`
/// and validating the range.
inline std::vector<int64_t> read_indices(const Tensor& t, int64_t size, const KernelContext& ctx,
                                         const char* what) {
  if (t.dtype() != DType::Int32 && t.dtype() != DType::Int64)
    ctx.fail(what, " must be int32 or int64, got ", t.describe());
  std::vector<int64_t> out = read_int64_values(t, ctx, what);
  for (auto& v : out) v = normalize_index(v, size, ctx, what);
  return out;
}

/// Walks a multi-index over `shape` in row-major order, tracking the matching element
/// offsets in two layouts (source and destination).
struct Odometer {
  const std::vector<int64_t>& shape;
  const std::vector<int64_t>& a_strides;
  const std::vector<int64_t>& b_strides;
  std::vector<int64_t> index;
  int64_t a = 0, b = 0;

  Odometer(const std::vector<int64_t>& s, const std::vector<int64_t>& as,
           const std::vector<int64_t>& bs, int64_t flat)
      : shape(s), a_strides(as), b_strides(bs), index(s.size(), 0) {
    for (size_t d = shape.size(); d-- > 0;) {
      index[d] = flat % shape[d];
      flat /= shape[d];
      a += index[d] * a_strides[d];
      b += index[d] * b_strides[d];
    }
  }
  void next() {
    for (size_t d = shape.size(); d-- > 0;) {
      ++index[d];
      a += a_strides[d];
      b += b_strides[d];
      if (index[d] < shape[d]) return;
      a -= a_strides[d] * shape[d];
      b -= b_strides[d] * shape[d];
      index[d] = 0;
    }
  }
};

}  // namespace dprun
