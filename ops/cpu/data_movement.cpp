#include "ops/cpu/data_movement.h"

namespace dprun {
namespace {

constexpr int64_t kTile = 32;

/// dst[o][p][c] = src[o * outer_stride + c * planes + p] for c < C: `C` planes of `planes`
/// contiguous elements interleaved, as an NCHW to NHWC transpose with few channels (an image's
/// colours) does. Reads run along the planes and writes along the output; the row-by-row
/// path would make a call and an index step for every C elements.
template <int C, class U>
void interleave_planes(const ExecutionContext& exec, const U* src, int64_t outer,
                       int64_t outer_stride, int64_t planes, U* dst) {
  constexpr int64_t kBlock = 1024;  // elements of a plane per task
  const int64_t blocks = (planes + kBlock - 1) / kBlock;
  exec.parallel_for(outer * blocks, 1, [&](int64_t begin, int64_t end) {
    for (int64_t w = begin; w < end; ++w) {
      const int64_t o = w / blocks, p0 = (w % blocks) * kBlock;
      const int64_t p1 = std::min(p0 + kBlock, planes);
      const U* s = src + o * outer_stride;
      U* d = dst + o * planes * C;
      for (int64_t p = p0; p < p1; ++p)
        for (int c = 0; c < C; ++c) d[p * C + c] = s[c * planes + p];
    }
  });
}

/// interleave_planes when `shape`/`strides` (merged, unit dims dropped) have that form with
/// 2 to 4 planes; false otherwise.
template <class U>
bool try_interleave_planes(const ExecutionContext& exec, const U* src, const Shape& shape,
                           const std::vector<int64_t>& strides, U* dst) {
  const size_t n = shape.size();
  if (n < 2 || n > 3 || strides[n - 2] != 1 || strides[n - 1] != shape[n - 2]) return false;
  const int64_t outer = n == 3 ? shape[0] : 1, outer_stride = n == 3 ? strides[0] : 0;
  const int64_t planes = shape[n - 2];
  switch (shape[n - 1]) {
    case 2:
      interleave_planes<2>(exec, src, outer, outer_stride, planes, dst);
      return true;
    case 3:
      interleave_planes<3>(exec, src, outer, outer_stride, planes, dst);
      return true;
    case 4:
      interleave_planes<4>(exec, src, outer, outer_stride, planes, dst);
      return true;
    default:
      return false;
  }
}

template <class U>
void strided_copy_typed(const ExecutionContext& exec, const U* src, int64_t src_offset,
                        const Shape& shape, const std::vector<int64_t>& strides, U* dst) {
  const size_t n = shape.size();
  const int64_t total = shape_numel(shape);
  const size_t last = n - 1;
  const int64_t row = shape[last];
  const int64_t row_stride = strides[last];
  if (try_interleave_planes(exec, src + src_offset, shape, strides, dst)) return;

  // A dimension other than the innermost that reads contiguously: the copy is a transpose of
  // that dim with the innermost one, done in tiles so reads and writes both stay in cache.
  size_t unit = n;
  if (row_stride != 1 && row >= 8)
    for (size_t d = 0; d < last; ++d)
      if (strides[d] == 1 && shape[d] >= 8) unit = d;

  if (unit < n) {
    const std::vector<int64_t> dst_strides = contiguous_strides(shape);
    std::vector<int64_t> outer_shape, outer_src, outer_dst;
    for (size_t d = 0; d < last; ++d)
      if (d != unit) {
        outer_shape.push_back(shape[d]);
        outer_src.push_back(strides[d]);
        outer_dst.push_back(dst_strides[d]);
      }
    const int64_t rows_u = shape[unit];
    const int64_t dst_stride_u = dst_strides[unit];
    const int64_t tiles_u = (rows_u + kTile - 1) / kTile;
    const int64_t outer = total / (rows_u * row);
    exec.parallel_for(outer * tiles_u, 1, [&](int64_t begin, int64_t end) {
      for (int64_t w = begin; w < end; ++w) {
        Odometer od(outer_shape, outer_src, outer_dst, w / tiles_u);
        const int64_t u0 = (w % tiles_u) * kTile, u1 = std::min(u0 + kTile, rows_u);
        const U* s = src + src_offset + od.a;
        U* o = dst + od.b;
        for (int64_t k0 = 0; k0 < row; k0 += kTile) {
          const int64_t k1 = std::min(k0 + kTile, row);
          for (int64_t u = u0; u < u1; ++u)
            for (int64_t k = k0; k < k1; ++k) o[u * dst_stride_u + k] = s[u + k * row_stride];
        }
      }
    });
    return;
  }

  const std::vector<int64_t> outer_shape(shape.begin(), shape.begin() + static_cast<long>(last));
  const std::vector<int64_t> outer_src(strides.begin(), strides.begin() + static_cast<long>(last));
  const std::vector<int64_t> outer_dst = contiguous_strides(outer_shape);
  const int64_t rows = total / row;
  const int64_t grain = std::max<int64_t>(1, (1 << 14) / row);
  exec.parallel_for(rows, grain, [&](int64_t begin, int64_t end) {
    Odometer od(outer_shape, outer_src, outer_dst, begin);
    for (int64_t r = begin; r < end; ++r, od.next()) {
      const U* s = src + src_offset + od.a;
      U* o = dst + r * row;
      if (row_stride == 1) {
        std::memcpy(o, s, static_cast<size_t>(row) * sizeof(U));
      } else {
        for (int64_t k = 0; k < row; ++k) o[k] = s[k * row_stride];
      }
    }
  });
}

}  // namespace

void strided_copy(const ExecutionContext& exec, const void* src, int64_t src_offset,
                  Shape out_shape, std::vector<int64_t> src_strides, void* dst, size_t elem_size) {
  DPRUN_CHECK(out_shape.size() == src_strides.size(), "strided_copy: rank mismatch");
  if (shape_numel(out_shape) == 0) return;
  // Drop unit dims, then merge neighbours that are contiguous with each other in the source.
  Shape shape;
  std::vector<int64_t> strides;
  for (size_t d = 0; d < out_shape.size(); ++d) {
    if (out_shape[d] == 1) continue;
    if (!shape.empty() && strides.back() == src_strides[d] * out_shape[d]) {
      shape.back() *= out_shape[d];
      strides.back() = src_strides[d];
    } else {
      shape.push_back(out_shape[d]);
      strides.push_back(src_strides[d]);
    }
  }
  if (shape.empty()) {
    shape.push_back(1);
    strides.push_back(1);
  }
  visit_element_size(elem_size, [&](auto zero) {
    using U = decltype(zero);
    strided_copy_typed(exec, static_cast<const U*>(src), src_offset, shape, strides,
                       static_cast<U*>(dst));
  });
}

void cpu_view_copy(const KernelContext& ctx, const Tensor& x, const StridedView& view, Tensor& y) {
  strided_copy(ctx.execution(), x.raw_data(), view.offset, view.shape, view.strides, y.raw_data(),
               dtype_size(x.dtype()));
}

void permute_copy(const ExecutionContext& exec, const void* src, const Shape& in_shape,
                  const std::vector<int64_t>& perm, void* dst, size_t elem_size) {
  const std::vector<int64_t> in_strides = contiguous_strides(in_shape);
  Shape out_shape(perm.size());
  std::vector<int64_t> strides(perm.size());
  for (size_t k = 0; k < perm.size(); ++k) {
    out_shape[k] = in_shape[static_cast<size_t>(perm[k])];
    strides[k] = in_strides[static_cast<size_t>(perm[k])];
  }
  strided_copy(exec, src, 0, out_shape, strides, dst, elem_size);
}

}  // namespace dprun
