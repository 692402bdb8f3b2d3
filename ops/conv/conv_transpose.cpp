// ConvTranspose: naive transposed (fractionally strided) convolution, the reference kernel.
#include <vector>

#include "engine/kernel.h"
#include "engine/op_facts.h"
#include "ops/common/conv_util.h"

namespace dprun {
namespace {

template <class T>
void conv_transpose_direct(const ExecutionContext& exec, const WindowGeometry& g, int64_t n_batch,
                           int64_t c, int64_t m, int64_t group, const T* x, const T* w,
                           const T* bias, T* y) {
  const size_t nd = g.rank();
  int64_t in_size = 1, out_size = 1, k_size = 1;
  for (size_t i = 0; i < nd; ++i) {
    in_size *= g.in[i];
    out_size *= g.out[i];
    k_size *= g.kernel[i];
  }
  const int64_t cg = c / group, mg = m / group;
  // Each task owns one (n, output channel) plane, so the scatter never races.
  exec.parallel_for(n_batch * m, 1, [&](int64_t begin, int64_t end) {
    std::vector<int64_t> pos(nd), kidx(nd);
    for (int64_t nm = begin; nm < end; ++nm) {
      const int64_t n = nm / m, oc = nm % m, grp = oc / mg, ocg = oc % mg;
      T* yp = y + nm * out_size;
      for (int64_t o = 0; o < out_size; ++o) yp[o] = bias ? bias[oc] : T(0);
      for (int64_t ci = 0; ci < cg; ++ci) {
        const int64_t ic = grp * cg + ci;
        const T* xp = x + (n * c + ic) * in_size;
        const T* wp = w + (ic * mg + ocg) * k_size;
        for (int64_t i = 0; i < in_size; ++i) {
          const T xv = xp[i];
          int64_t rest = i;
          for (size_t d = nd; d-- > 0;) {
            pos[d] = rest % g.in[d];
            rest /= g.in[d];
          }
          for (int64_t k = 0; k < k_size; ++k) {
            int64_t r = k, flat = 0;
            bool inside = true;
            for (size_t d = nd; d-- > 0;) {
              kidx[d] = r % g.kernel[d];
              r /= g.kernel[d];
            }
            for (size_t d = 0; d < nd; ++d) {
              int64_t od = pos[d] * g.strides[d] + kidx[d] * g.dilations[d] - g.pads_begin[d];
              if (od < 0 || od >= g.out[d]) {
                inside = false;
                break;
              }
              flat = flat * g.out[d] + od;
            }
            if (inside) yp[flat] += xv * wp[k];
          }
        }
      }
    }
  });
}

class ConvTransposeKernel : public OpKernel {
 public:
  explicit ConvTransposeKernel(const KernelInfo& info) {
    attrs_.parse(info.node);
    group_ = info.node.attr_int("group", 1);
    output_padding_ = info.node.attr_ints("output_padding", {});
    output_shape_ = info.node.attr_ints("output_shape", {});
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    const Tensor& w = ctx.input(1);
    const Tensor* b = ctx.optional_input(2);
    const ConvTransposeShapes s =
        conv_transpose_shapes(ctx, attrs_, group_, output_padding_, output_shape_, x, w, b);
    Tensor& y = ctx.allocate_output(0, s.out_shape, x.dtype());
    if (y.numel() == 0) return;
    auto run = [&](auto tag) {
      using T = decltype(tag);
      conv_transpose_direct<T>(ctx.execution(), s.g, s.n, s.c, s.m, group_, x.data<T>(),
                               w.data<T>(), b ? b->data<T>() : nullptr, y.data<T>());
    };
    visit_dtype_among<float, double>(x.dtype(), run);
  }

 private:
  WindowAttrs attrs_;
  int64_t group_ = 1;
  std::vector<int64_t> output_padding_, output_shape_;
};

DPRUN_REGISTER_KERNEL({.op_type = "ConvTranspose",
                       .since = 1,
                       .dtypes = kFloatTypes,
                       .factory = make_kernel<ConvTransposeKernel>});

}  // namespace
}  // namespace dprun

// The ops' facts (engine/op_facts.h): output types, shapes, 16-bit and layout policy.
namespace dprun {
namespace {
DPRUN_REGISTER_OP_FACTS({.op_type = "ConvTranspose", .shape = ShapeKind::TransposedConvolution});

}  // namespace
}  // namespace dprun
