// MeanVarianceNormalization: Y = (X - mean) / (sqrt(var) + 1e-9) with mean and population
// variance over `axes` (default [0, 2, 3]), as the ONNX function body defines it.
#include <cmath>

#include "engine/op_facts.h"
#include "ops/common/reduce_common.h"

namespace dprun {
namespace {

class MvnKernel : public OpKernel {
 public:
  explicit MvnKernel(const KernelInfo& info)
      : axes_(info.node.attr_ints("axes", std::vector<int64_t>{0, 2, 3})) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    const int64_t rank = x.rank();
    const std::vector<int64_t> axes = normalize_axes(ctx.node(), axes_, rank);
    std::vector<bool> reduced(static_cast<size_t>(rank), false);
    for (int64_t a : axes) reduced[static_cast<size_t>(a)] = true;
    // Kept dims index the groups; reduced dims give each group's element offsets.
    std::vector<int64_t> strides(static_cast<size_t>(rank), 1);
    for (int64_t d = rank - 1; d > 0; --d) strides[d - 1] = strides[d] * x.shape()[d];
    std::vector<int64_t> kept_sizes, kept_strides, red_sizes, red_strides;
    for (int64_t d = 0; d < rank; ++d) {
      (reduced[d] ? red_sizes : kept_sizes).push_back(x.shape()[d]);
      (reduced[d] ? red_strides : kept_strides).push_back(strides[d]);
    }
    const int64_t groups = shape_numel(kept_sizes), count = shape_numel(red_sizes);
    std::vector<int64_t> offsets;
    offsets.reserve(static_cast<size_t>(count));
    std::vector<int64_t> idx(red_sizes.size(), 0);
    for (int64_t r = 0; r < count; ++r) {
      int64_t off = 0;
      for (size_t d = 0; d < idx.size(); ++d) off += idx[d] * red_strides[d];
      offsets.push_back(off);
      for (size_t d = idx.size(); d-- > 0;) {
        if (++idx[d] < red_sizes[d]) break;
        idx[d] = 0;
      }
    }
    Tensor& y = ctx.allocate_output(0, x.shape(), x.dtype());
    if (x.numel() == 0) return;
    visit_float_dtype(ctx, x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const T* xp = x.data<T>();
      T* yp = y.data<T>();
      ctx.parallel_for(
          groups, std::max<int64_t>(1, 8192 / std::max<int64_t>(count, 1)),
          [&](int64_t g0, int64_t g1) {
            for (int64_t g = g0; g < g1; ++g) {
              int64_t rest = g, base = 0;
              for (size_t d = kept_sizes.size(); d-- > 0;) {
                base += (rest % kept_sizes[d]) * kept_strides[d];
                rest /= kept_sizes[d];
              }
              double sum = 0;
              for (int64_t off : offsets) sum += load_as<double>(xp[base + off]);
              const double mean = sum / static_cast<double>(count);
              double sq = 0;
              for (int64_t off : offsets) {
                const double d = load_as<double>(xp[base + off]) - mean;
                sq += d * d;
              }
              const double inv = 1.0 / (std::sqrt(sq / static_cast<double>(count)) + 1e-9);
              for (int64_t off : offsets)
                yp[base + off] = store_as<T>((load_as<double>(xp[base + off]) - mean) * inv);
            }
          });
    });
  }

 private:
  std::vector<int64_t> axes_;
};

DPRUN_REGISTER_KERNEL({.op_type = "MeanVarianceNormalization",
                       .since = 9,
                       .factory = make_kernel<MvnKernel>});

}  // namespace
}  // namespace dprun

// The ops' facts (engine/op_facts.h): output types, shapes, 16-bit and layout policy.
namespace dprun {
namespace {
DPRUN_REGISTER_OP_FACTS({.op_type = "MeanVarianceNormalization", .shape = ShapeKind::SameAsInput0});

}  // namespace
}  // namespace dprun
