// Conv and ConvInteger: naive direct convolution over 1-D..n-D inputs (the reference kernels).
#include <vector>

#include "engine/kernel.h"
#include "engine/op_facts.h"
#include "ops/common/conv_util.h"
#include "ops/common/nhwc_kernel.h"

namespace dprun {
namespace {

/// Direct convolution: y[n,m,o] = bias[m] + sum_{c,k} (x[n,c,o*s+k*d-p] - xz) * (w[m,c,k] - wz[m]).
/// Padded positions contribute nothing (they equal the zero point).
template <class TX, class TW, class TY>
void conv_direct(const ExecutionContext& exec, const ConvShapes& s, const TX* x, const TW* w,
                 const TY* bias, TX x_zero, const std::vector<TW>& w_zero, TY* y) {
  const WindowGeometry& g = s.g;
  const size_t nd = g.rank();
  int64_t in_size = 1, out_size = 1, k_size = 1;
  for (size_t i = 0; i < nd; ++i) {
    in_size *= g.in[i];
    out_size *= g.out[i];
    k_size *= g.kernel[i];
  }
  const int64_t cg = s.c / s.group, mg = s.m / s.group;
  // Per kernel position: its dilated offset per dim and its flat input offset.
  std::vector<int64_t> k_off(static_cast<size_t>(k_size) * nd);
  std::vector<int64_t> k_flat(static_cast<size_t>(k_size));
  for (int64_t k = 0; k < k_size; ++k) {
    int64_t rest = k, flat = 0, stride = 1;
    for (size_t i = nd; i-- > 0;) {
      int64_t ki = rest % g.kernel[i];
      rest /= g.kernel[i];
      k_off[static_cast<size_t>(k) * nd + i] = ki * g.dilations[i];
      flat += ki * g.dilations[i] * stride;
      stride *= g.in[i];
    }
    k_flat[static_cast<size_t>(k)] = flat;
  }
  exec.parallel_for(s.n * s.m, 1, [&](int64_t begin, int64_t end) {
    std::vector<int64_t> start(nd);
    for (int64_t nm = begin; nm < end; ++nm) {
      const int64_t n = nm / s.m, m = nm % s.m, grp = m / mg;
      const TX* xg = x + (n * s.c + grp * cg) * in_size;
      const TW* wm = w + m * cg * k_size;
      const TW wz = w_zero.empty()
                        ? TW(0)
                        : (w_zero.size() == 1 ? w_zero[0] : w_zero[static_cast<size_t>(m)]);
      TY* ym = y + nm * out_size;
      for (int64_t o = 0; o < out_size; ++o) {
        int64_t rest = o, base = 0, stride = 1;
        for (size_t i = nd; i-- > 0;) {
          int64_t oi = rest % g.out[i];
          rest /= g.out[i];
          start[i] = oi * g.strides[i] - g.pads_begin[i];
          base += start[i] * stride;
          stride *= g.in[i];
        }
        TY acc = bias ? bias[m] : TY(0);
        for (int64_t k = 0; k < k_size; ++k) {
          bool inside = true;
          for (size_t i = 0; i < nd; ++i) {
            int64_t pos = start[i] + k_off[static_cast<size_t>(k) * nd + i];
            if (pos < 0 || pos >= g.in[i]) {
              inside = false;
              break;
            }
          }
          if (!inside) continue;
          const TX* xp = xg + base + k_flat[static_cast<size_t>(k)];
          const TW* wp = wm + k;
          for (int64_t c = 0; c < cg; ++c)
            acc += (static_cast<TY>(xp[c * in_size]) - static_cast<TY>(x_zero)) *
                   (static_cast<TY>(wp[c * k_size]) - static_cast<TY>(wz));
        }
        ym[o] = acc;
      }
    }
  });
}

class ConvKernel : public OpKernel {
 public:
  explicit ConvKernel(const KernelInfo& info) {
    attrs_.parse(info.node);
    group_ = info.node.attr_int("group", 1);
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    const Tensor& w = ctx.input(1);
    const Tensor* b = ctx.optional_input(2);
    if (w.dtype() != x.dtype()) ctx.fail("W dtype ", dtype_name(w.dtype()), " differs from X's");
    ConvShapes s = conv_shapes(ctx, attrs_, group_, x, w);
    if (b && (b->dtype() != x.dtype() || b->shape() != Shape{s.m}))
      ctx.fail("B must be ", dtype_name(x.dtype()), "[", s.m, "], got ", b->describe());
    Tensor& y = ctx.allocate_output(0, s.out_shape, x.dtype());
    if (y.numel() == 0) return;
    auto run = [&](auto tag) {
      using T = decltype(tag);
      conv_direct<T, T, T>(ctx.execution(), s, x.data<T>(), w.data<T>(), b ? b->data<T>() : nullptr,
                           T(0), {}, y.data<T>());
    };
    visit_dtype_among<float, double>(x.dtype(), run);
  }

 private:
  WindowAttrs attrs_;
  int64_t group_ = 1;
};

/// ConvInteger: uint8/int8 inputs with zero points, int32 output.
class ConvIntegerKernel : public OpKernel {
 public:
  explicit ConvIntegerKernel(const KernelInfo& info) {
    attrs_.parse(info.node);
    group_ = info.node.attr_int("group", 1);
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    const Tensor& w = ctx.input(1);
    const Tensor* xz = ctx.optional_input(2);
    const Tensor* wz = ctx.optional_input(3);
    ConvShapes s = conv_shapes(ctx, attrs_, group_, x, w);
    if (xz && (xz->numel() != 1 || xz->dtype() != x.dtype()))
      ctx.fail("x_zero_point must be a single ", dtype_name(x.dtype()), ", got ", xz->describe());
    if (wz && ((wz->numel() != 1 && wz->shape() != Shape{s.m}) || wz->dtype() != w.dtype()))
      ctx.fail("w_zero_point must be a scalar or [", s.m, "] of ", dtype_name(w.dtype()), ", got ",
               wz->describe());
    Tensor& y = ctx.allocate_output(0, s.out_shape, DType::Int32);
    if (y.numel() == 0) return;
    auto with_x = [&](auto xtag) {
      using TX = decltype(xtag);
      auto with_w = [&](auto wtag) {
        using TW = decltype(wtag);
        TX x0 = xz ? xz->data<TX>()[0] : TX(0);
        std::vector<TW> w0;
        if (wz) w0.assign(wz->data<TW>(), wz->data<TW>() + wz->numel());
        conv_direct<TX, TW, int32_t>(ctx.execution(), s, x.data<TX>(), w.data<TW>(), nullptr, x0,
                                     w0, y.data<int32_t>());
      };
      if (w.dtype() == DType::UInt8)
        with_w(uint8_t{});
      else if (w.dtype() == DType::Int8)
        with_w(int8_t{});
      else
        ctx.fail("w must be uint8 or int8, got ", dtype_name(w.dtype()));
    };
    if (x.dtype() == DType::UInt8)
      with_x(uint8_t{});
    else if (x.dtype() == DType::Int8)
      with_x(int8_t{});
    else
      ctx.fail("x must be uint8 or int8, got ", dtype_name(x.dtype()));
  }

 private:
  WindowAttrs attrs_;
  int64_t group_ = 1;
};

DPRUN_REGISTER_KERNEL(
    {.op_type = "Conv", .since = 1, .dtypes = kFloatTypes, .factory = make_kernel<ConvKernel>});
DPRUN_REGISTER_KERNEL({.op_type = "ConvInteger",
                       .since = 10,
                       .dtypes = {DType::UInt8, DType::Int8},
                       .factory = make_kernel<ConvIntegerKernel>});

}  // namespace
}  // namespace dprun

// The ops' facts (engine/op_facts.h): output types, shapes, 16-bit and layout policy.
namespace dprun {
namespace {
/// 2-D float32 convolutions with constant weights run on NHWC values by ConvNHWC (oneDNN),
/// from an NHWC value or from any known 4-D float32 one (the rewrite transposes it).
bool conv_runs_in_nhwc(const LayoutQuery& query) {
  const Node& n = query.node;
  const std::string& x = n.inputs[0];
  auto w = n.inputs.size() > 1 ? query.graph.initializers.find(n.inputs[1])
                               : query.graph.initializers.end();
  return w != query.graph.initializers.end() && w->second.dtype() == DType::Float32 &&
         w->second.rank() == 4 && (query.is_nhwc(x) || known_rank4_float(query.graph, x));
}

DPRUN_REGISTER_OP_FACTS({.op_type = "Conv",
                         .shape = ShapeKind::Convolution,
                         .layout = {.runs_in_nhwc = conv_runs_in_nhwc,
                                    .to_nhwc = use_nhwc_kernel,
                                    .absorbs_activation = true}});
DPRUN_REGISTER_OP_FACTS({.op_type = "ConvInteger",
                         .dtype = OutputDTypeRule::fixed(DType::Int32),
                         .shape = ShapeKind::Convolution});

}  // namespace
}  // namespace dprun
