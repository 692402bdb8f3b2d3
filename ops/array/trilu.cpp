// Trilu: keeps the upper (j - i >= k) or lower (j - i <= k) triangle of the last two dims and
// zeroes the rest. Zero is all-zero bytes for every dtype, so the copy is type-agnostic.
#include "engine/op_facts.h"
#include "ops/common/data_movement.h"

namespace dprun {
namespace {

class TriluKernel : public OpKernel {
 public:
  explicit TriluKernel(const KernelInfo& info) : upper_(info.node.attr_int("upper", 1) != 0) {}
  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    if (x.rank() < 2) ctx.fail("input must have rank >= 2, got ", x.describe());
    const int64_t rows = x.dim(-2), cols = x.dim(-1);
    // Any |k| beyond rows + cols has the same effect; clamping keeps i + k from overflowing.
    const int64_t k =
        std::clamp<int64_t>(ctx.has_input(1) ? read_int64_scalar(ctx.input(1), ctx, "k") : 0,
                            -(rows + cols + 1), rows + cols + 1);
    const int64_t mats = rows * cols == 0 ? 0 : x.numel() / (rows * cols);
    Tensor& y = ctx.allocate_output(0, x.shape(), x.dtype());
    const size_t elem = dtype_size(x.dtype());
    const char* src = static_cast<const char*>(x.raw_data());
    char* dst = static_cast<char*>(y.raw_data());
    ctx.parallel_for(mats * rows, std::max<int64_t>(1, 4096 / std::max<int64_t>(cols, 1)),
                     [&](int64_t b, int64_t e) {
                       for (int64_t rr = b; rr < e; ++rr) {
                         const int64_t i = rr % rows;
                         // Columns [lo, hi) are kept.
                         int64_t lo = upper_ ? i + k : 0;
                         int64_t hi = upper_ ? cols : i + k + 1;
                         lo = std::clamp<int64_t>(lo, 0, cols);
                         hi = std::clamp<int64_t>(hi, lo, cols);
                         char* o = dst + static_cast<size_t>(rr * cols) * elem;
                         const char* s = src + static_cast<size_t>(rr * cols) * elem;
                         std::memset(o, 0, static_cast<size_t>(cols) * elem);
                         std::memcpy(o + static_cast<size_t>(lo) * elem,
                                     s + static_cast<size_t>(lo) * elem,
                                     static_cast<size_t>(hi - lo) * elem);
                       }
                     });
  }

 private:
  bool upper_;
};

DPRUN_REGISTER_KERNEL({.op_type = "Trilu", .since = 14, .factory = make_kernel<TriluKernel>});

}  // namespace
}  // namespace dprun

// The ops' facts (engine/op_facts.h): output types, shapes, 16-bit and layout policy.
namespace dprun {
namespace {
DPRUN_REGISTER_OP_FACTS({.op_type = "Trilu", .shape = ShapeKind::SameAsInput0});

}  // namespace
}  // namespace dprun
