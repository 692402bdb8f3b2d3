#pragma once
// numpy matmul shape rules shared by the MatMul kernels of every device.
#include <algorithm>
#include <vector>

#include "engine/kernel.h"
#include "ops/common/broadcast.h"

namespace dprun {

/// Shapes of a batched matmul after promoting 1-D operands: a is [batch_a..., M, K] and b is
/// [batch_b..., K, N], both padded with leading 1s to rank `a.size()` == `b.size()`.
struct MatMulShapes {
  Shape a, b;       // padded operand shapes (rank >= 2)
  Shape batch;      // broadcast batch dims
  Shape out_shape;  // the ONNX output shape (promoted dims removed)
  int64_t m = 0, k = 0, n = 0;
};

inline MatMulShapes matmul_shapes(const KernelContext& ctx, const Shape& a_in, const Shape& b_in) {
  if (a_in.empty() || b_in.empty())
    ctx.fail("MatMul operands must have rank >= 1, got ", shape_to_string(a_in), " and ",
             shape_to_string(b_in));
  MatMulShapes s;
  s.a = a_in.size() == 1 ? Shape{1, a_in[0]} : a_in;
  s.b = b_in.size() == 1 ? Shape{b_in[0], 1} : b_in;
  const size_t rank = std::max(s.a.size(), s.b.size());
  s.a.insert(s.a.begin(), rank - s.a.size(), 1);
  s.b.insert(s.b.begin(), rank - s.b.size(), 1);
  s.m = s.a[rank - 2];
  s.k = s.a[rank - 1];
  s.n = s.b[rank - 1];
  if (s.b[rank - 2] != s.k)
    ctx.fail("MatMul inner dimensions differ: ", shape_to_string(a_in), " x ",
             shape_to_string(b_in));
  for (size_t i = 0; i + 2 < rank; ++i) {
    int64_t da = s.a[i], db = s.b[i];
    if (da != db && da != 1 && db != 1)
      ctx.fail("MatMul batch dimensions do not broadcast: ", shape_to_string(a_in), " x ",
               shape_to_string(b_in));
    s.batch.push_back(da == 1 ? db : da);
  }
  s.out_shape = s.batch;
  if (a_in.size() != 1) s.out_shape.push_back(s.m);
  if (b_in.size() != 1) s.out_shape.push_back(s.n);
  return s;
}

/// Which matrix of a and of b each output matrix multiplies when the batch dims broadcast.
class MatMulBatchIndex {
 public:
  explicit MatMulBatchIndex(const MatMulShapes& s)
      : batch_(s.batch),
        a_strides_(broadcast_strides(Shape(s.a.begin(), s.a.end() - 2), s.batch.size())),
        b_strides_(broadcast_strides(Shape(s.b.begin(), s.b.end() - 2), s.batch.size())) {}

  /// Sets `a` and `b` to the indices of the matrices of a and b behind output matrix `out`.
  void operator()(int64_t out, int64_t& a, int64_t& b) const {
    a = b = 0;
    for (size_t d = batch_.size(); d-- > 0;) {
      const int64_t idx = out % batch_[d];
      out /= batch_[d];
      a += idx * a_strides_[d];
      b += idx * b_strides_[d];
    }
  }

 private:
  Shape batch_;
  std::vector<int64_t> a_strides_, b_strides_;
};

}  // namespace dprun
