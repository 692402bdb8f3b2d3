// Concat and Split along one axis: each is a sequence of contiguous block copies per outer
// index, independent of the dtype.
#include "ops/cpu/concat_split.h"

namespace dprun {
namespace {

class ConcatKernel : public OpKernel {
 public:
  explicit ConcatKernel(const KernelInfo& info) : params_(info) {}
  void compute(KernelContext& ctx) const override {
    const ConcatLayout c = params_.layout(ctx);
    const int64_t axis = c.axis, outer = c.outer, inner = c.inner;
    Tensor& y = ctx.allocate_output(0, c.out_shape, c.parts[0]->dtype());
    const size_t elem = dtype_size(y.dtype());
    const size_t out_row =
        static_cast<size_t>(c.out_shape[static_cast<size_t>(axis)] * inner) * elem;
    char* dst = static_cast<char*>(y.raw_data());
    ctx.parallel_for(
        outer, std::max<int64_t>(1, (1 << 16) / static_cast<int64_t>(out_row + 1)),
        [&](int64_t begin, int64_t end) {
          for (int64_t o = begin; o < end; ++o) {
            char* row = dst + static_cast<size_t>(o) * out_row;
            for (const Tensor* t : c.parts) {
              const size_t bytes =
                  static_cast<size_t>(t->shape()[static_cast<size_t>(axis)] * inner) * elem;
              if (bytes == 0) continue;
              std::memcpy(row,
                          static_cast<const char*>(t->raw_data()) + static_cast<size_t>(o) * bytes,
                          bytes);
              row += bytes;
            }
          }
        });
  }

 private:
  ConcatParams params_;
};

class SplitKernel : public OpKernel {
 public:
  explicit SplitKernel(const KernelInfo& info) : params_(info) {}
  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    const SplitLayout s = params_.layout(ctx, x.shape());
    const int64_t axis = s.axis, outer = s.outer, inner = s.inner;
    const int64_t dim = x.shape()[static_cast<size_t>(axis)];
    const size_t elem = dtype_size(x.dtype());
    const size_t in_row = static_cast<size_t>(dim * inner) * elem;
    const char* src = static_cast<const char*>(x.raw_data());
    int64_t start = 0;
    for (size_t i = 0; i < s.sizes.size(); ++i) {
      const int64_t len = s.sizes[i];
      if (ctx.output_wanted(i)) {
        Shape shape = x.shape();
        shape[static_cast<size_t>(axis)] = len;
        Tensor& y = ctx.allocate_output(i, shape, x.dtype());
        const size_t bytes = static_cast<size_t>(len * inner) * elem;
        const size_t offset = static_cast<size_t>(start * inner) * elem;
        char* dst = static_cast<char*>(y.raw_data());
        if (bytes > 0)
          ctx.parallel_for(outer, std::max<int64_t>(1, (1 << 16) / static_cast<int64_t>(bytes)),
                           [&](int64_t begin, int64_t end) {
                             for (int64_t o = begin; o < end; ++o)
                               std::memcpy(dst + static_cast<size_t>(o) * bytes,
                                           src + static_cast<size_t>(o) * in_row + offset, bytes);
                           });
      }
      start += len;
    }
  }

 private:
  SplitParams params_;
};

DPRUN_REGISTER_KERNEL({.op_type = "Concat", .since = 1, .factory = make_kernel<ConcatKernel>});
DPRUN_REGISTER_KERNEL({.op_type = "Split", .since = 1, .factory = make_kernel<SplitKernel>});

}  // namespace
}  // namespace dprun
