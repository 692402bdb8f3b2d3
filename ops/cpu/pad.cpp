// Pad: constant, reflect, edge and wrap modes (arguments in ops/common/pad.h). Each output
// coordinate maps, per dimension, to a source coordinate or to "padding" (math::pad_source).
#include "ops/common/pad.h"
#include "engine/op_facts.h"

namespace dprun {
namespace {

class PadKernel : public OpKernel {
 public:
  explicit PadKernel(const KernelInfo& info) : params_(info) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    const int64_t r = x.rank();
    const Shape& in = x.shape();
    const PadLayout layout = params_.layout(ctx, x);
    const Shape& out_shape = layout.out_shape;

    // Per dimension: source coordinate of each output coordinate, -1 for padding.
    std::vector<std::vector<int64_t>> maps(static_cast<size_t>(r));
    for (size_t d = 0; d < static_cast<size_t>(r); ++d) {
      auto& map = maps[d];
      map.resize(static_cast<size_t>(out_shape[d]));
      for (int64_t o = 0; o < out_shape[d]; ++o)
        map[static_cast<size_t>(o)] = math::pad_source(params_.mode(), o - layout.begin[d], in[d]);
    }

    Tensor& y = ctx.allocate_output(0, out_shape, x.dtype());
    if (y.numel() == 0) return;
    const std::vector<int64_t> in_strides = contiguous_strides(in);
    const int64_t row = r > 0 ? out_shape.back() : 1;
    const int64_t rows = y.numel() / row;
    const std::vector<int64_t> last_map = r > 0 ? maps.back() : std::vector<int64_t>{0};
    visit_element_size(dtype_size(x.dtype()), [&](auto zero) {
      using U = decltype(zero);
      const U* src = static_cast<const U*>(x.raw_data());
      U* dst = static_cast<U*>(y.raw_data());
      const U pad_value = *static_cast<const U*>(layout.fill.raw_data());
      ctx.parallel_for(rows, std::max<int64_t>(1, 4096 / row), [&](int64_t b, int64_t e) {
        for (int64_t rr = b; rr < e; ++rr) {
          // Source offset of this row's outer coordinates, or -1 when any is padding.
          int64_t rest = rr, off = 0;
          for (int64_t d = r - 2; d >= 0 && off >= 0; --d) {
            const size_t du = static_cast<size_t>(d);
            const int64_t i = maps[du][static_cast<size_t>(rest % out_shape[du])];
            rest /= out_shape[du];
            off = i < 0 ? -1 : off + i * in_strides[du];
          }
          U* o = dst + rr * row;
          if (off < 0) {
            std::fill(o, o + row, pad_value);
            continue;
          }
          for (int64_t k = 0; k < row; ++k) {
            const int64_t i = last_map[static_cast<size_t>(k)];
            o[k] = i < 0 ? pad_value : src[off + i];
          }
        }
      });
    });
  }

 private:
  PadParams params_;
};

DPRUN_REGISTER_KERNEL({.op_type = "Pad", .since = 1, .factory = make_kernel<PadKernel>});

}  // namespace
}  // namespace dprun

// The ops' facts (engine/op_facts.h): output types, shapes, 16-bit and layout policy.
namespace dprun {
namespace {
DPRUN_REGISTER_OP_FACTS({.op_type = "Pad", .shape = ShapeKind::SameRank});

}  // namespace
}  // namespace dprun
