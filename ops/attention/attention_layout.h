#pragma once
// What the Attention and AttentionGrad kernels (engine/rewrites/attention_fusion.h) share: their
// operands as strided views of the stored tensors (a Transpose folded into the read or the
// write), the shapes the views must agree on, the split of the batch into chunks whose scores
// stay in cache, and oneDNN products of such views, one primitive per chunk shape, executed on
// each chunk at its offset.
#include <cstdint>
#include <memory>
#include <vector>

#include "engine/kernel.h"
#include "ops/common/data_movement.h"
#include "ops/cpu/onednn_util.h"

namespace dprun::attention {

/// A logical tensor read or written through strides (in elements) of a stored dense one (its
/// offset unused: the kernels add each chunk's).
using View = StridedView;

/// `v` with its last two dims swapped: the same elements, transposed.
View transposed(View v);

/// Transpose(stored, perm) as a view of the stored tensor (perm empty: the tensor itself).
View read_view(const Shape& stored, const std::vector<int64_t>& perm);

/// The view O such that Transpose(O, perm) is the stored tensor of shape `stored`: how a result
/// is written so that the Transpose after it is never run (perm empty: the tensor itself).
View written_view(const Shape& stored, const std::vector<int64_t>& perm);

/// A dense view of `dims`.
View dense_view(const Shape& dims);

/// The perms of the fused node's operands, as its attributes name them.
struct Perms {
  std::vector<int64_t> q, k, v, o;
  explicit Perms(const Node& node);
};

/// The shapes of one attention: q [batch..., Lq, d], kt [batch..., d, Lk], v [batch..., Lk, dv]
/// with one batch shape (no broadcasting), checked.
struct Shapes {
  View q, kt, v;
  Shape batch;
  int64_t lq = 0, lk = 0, d = 0, dv = 0;
  /// The scores' shape [batch..., Lq, Lk] and the result's [batch..., Lq, dv].
  Shape scores() const;
  Shape result() const;
};
Shapes attention_shapes(const KernelContext& ctx, const Perms& perms, const Shape& q,
                        const Shape& k, const Shape& v);

/// The batch's first dim split into chunks of `size` entries (a divisor of it), each holding
/// `rows` rows of scores of Lk floats, at most about kChunkBytes of them where one entry fits.
struct Chunks {
  int64_t size = 1, count = 1, rows = 0;
};
inline constexpr int64_t kChunkBytes = 256 << 10;
Chunks chunks_of(const Shapes& s);

/// `v` restricted to a chunk of `size` entries of its first dim.
View chunk_of(View v, int64_t size);

/// A mask read at each row of the scores, broadcast to them as numpy broadcasts: the offset of
/// row r's first element (r counting the rows of all the scores' leading dims) and the step
/// between its elements.
struct MaskView {
  Shape row_dims;                    // the scores' dims but the last
  std::vector<int64_t> row_strides;  // the mask's stride for each, 0 where broadcast
  int64_t col_stride = 0;
  int64_t offset(int64_t row) const;
};
MaskView mask_view(const KernelContext& ctx, const Shape& mask, const Shape& scores);

/// A product C = A B of views (batched over the leading dims), as one oneDNN primitive; where
/// C's last dim is not its contiguous one, C^T = B^T A^T is computed instead.
class Product {
 public:
  Product(const View& a, const View& b, const View& c);
  /// Runs it on the chunk whose first elements are at a, b and c.
  void run(const float* a, const float* b, float* c) const;

 private:
  bool swapped_ = false;
  dnnl::matmul prim_;
  dnnl::memory::desc a_md_, b_md_, c_md_, scratchpad_md_;
};

}  // namespace dprun::attention
