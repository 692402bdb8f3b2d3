#pragma once
// Gemm attributes and shape rules shared by the Gemm kernels of every device.
#include <vector>

#include "engine/kernel.h"

namespace dprun {

struct GemmAttrs {
  bool trans_a = false, trans_b = false;
  float alpha = 1.f, beta = 1.f;
  bool legacy_no_broadcast = false;  // opset < 7 with broadcast=0: C must be exactly [M, N]

  explicit GemmAttrs(const KernelInfo& info) {
    trans_a = info.node.attr_int("transA", 0) != 0;
    trans_b = info.node.attr_int("transB", 0) != 0;
    alpha = info.node.attr_float("alpha", 1.f);
    beta = info.node.attr_float("beta", 1.f);
    // FusedGemm (domain dprun) is made only from Gemm-7 and later.
    legacy_no_broadcast =
        info.node.domain.empty() && info.opset < 7 && info.node.attr_int("broadcast", 0) == 0;
  }
};

struct GemmShapes {
  int64_t m = 0, k = 0, n = 0;
};

inline GemmShapes gemm_shapes(const KernelContext& ctx, const GemmAttrs& attrs, const Tensor& a,
                              const Tensor& b, const Tensor* c) {
  if (a.rank() != 2 || b.rank() != 2)
    ctx.fail("A and B must be matrices, got ", shape_to_string(a.shape()), " and ",
             shape_to_string(b.shape()));
  if (a.dtype() != b.dtype() || (c && c->dtype() != a.dtype()))
    ctx.fail("operand dtypes differ: A ", a.describe(), ", B ", b.describe());
  GemmShapes s;
  s.m = attrs.trans_a ? a.dim(1) : a.dim(0);
  s.k = attrs.trans_a ? a.dim(0) : a.dim(1);
  s.n = attrs.trans_b ? b.dim(0) : b.dim(1);
  int64_t kb = attrs.trans_b ? b.dim(1) : b.dim(0);
  if (kb != s.k)
    ctx.fail("inner dimensions differ: A ", shape_to_string(a.shape()), " transA=", attrs.trans_a,
             ", B ", shape_to_string(b.shape()), " transB=", attrs.trans_b);
  if (c) {
    const Shape& cs = c->shape();
    bool ok = cs.size() <= 2;
    if (ok && cs.size() >= 1) ok = cs.back() == s.n || cs.back() == 1;
    if (ok && cs.size() == 2) ok = cs[0] == s.m || cs[0] == 1;
    if (attrs.legacy_no_broadcast) ok = c->numel() == s.m * s.n && cs.size() <= 2;
    if (!ok) ctx.fail("C ", shape_to_string(cs), " does not broadcast to [", s.m, ", ", s.n, "]");
  }
  return s;
}

/// Row and column strides of C viewed as [M, N] (0 along broadcast dimensions).
inline void gemm_c_strides(const Shape& c_shape, int64_t m, int64_t n, int64_t& row, int64_t& col) {
  row = col = 0;
  if (c_shape.size() == 2 && c_shape[0] == m && m != 1) row = c_shape[1];
  if (!c_shape.empty() && c_shape.back() == n && n != 1) col = 1;
  // A legacy C given flat with M*N elements.
  if (c_shape.size() == 1 && c_shape[0] == m * n && m != 1) {
    row = n;
    col = 1;
  }
}

}  // namespace dprun
