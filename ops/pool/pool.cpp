// Pooling reference kernels: MaxPool (with optional Indices), AveragePool, LpPool and the
// global variants GlobalMaxPool, GlobalAveragePool, GlobalLpPool.
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "engine/half.h"
#include "engine/kernel.h"
#include "engine/op_facts.h"
#include "ops/common/conv_util.h"
#include "ops/common/nhwc_kernel.h"

namespace dprun {
namespace {

/// Calls fn(plane, o, valid, n_valid, n_in_pads) for every output position `o` of every
/// (batch, channel) plane: `valid` lists the flat spatial input indices under the window,
/// n_in_pads counts window positions inside the padded extent [-pad_begin, in + pad_end).
template <class Fn>
void for_each_window(const ExecutionContext& exec, const WindowGeometry& g, int64_t planes,
                     Fn&& fn) {
  const size_t nd = g.rank();
  int64_t out_size = 1, k_size = 1;
  for (size_t i = 0; i < nd; ++i) {
    out_size *= g.out[i];
    k_size *= g.kernel[i];
  }
  exec.parallel_for(planes * out_size, 256, [&](int64_t begin, int64_t end) {
    std::vector<int64_t> start(nd), valid(static_cast<size_t>(k_size));
    for (int64_t t = begin; t < end; ++t) {
      const int64_t plane = t / out_size, o = t % out_size;
      int64_t rest = o;
      for (size_t i = nd; i-- > 0;) {
        start[i] = (rest % g.out[i]) * g.strides[i] - g.pads_begin[i];
        rest /= g.out[i];
      }
      int64_t n_valid = 0, n_pads = 0;
      for (int64_t k = 0; k < k_size; ++k) {
        int64_t r = k, flat = 0;
        bool inside = true, in_pads = true;
        std::vector<int64_t>::size_type dim = nd;
        int64_t mult = 1;
        while (dim-- > 0) {
          int64_t pos = start[dim] + (r % g.kernel[dim]) * g.dilations[dim];
          r /= g.kernel[dim];
          if (pos < -g.pads_begin[dim] || pos >= g.in[dim] + g.pads_end[dim]) in_pads = false;
          if (pos < 0 || pos >= g.in[dim]) inside = false;
          flat += pos * mult;
          mult *= g.in[dim];
        }
        if (in_pads) ++n_pads;
        if (inside) valid[static_cast<size_t>(n_valid++)] = flat;
      }
      fn(plane, o, valid.data(), n_valid, n_pads);
    }
  });
}

/// Flat spatial index in column-major order (MaxPool storage_order=1).
int64_t column_major(const WindowGeometry& g, int64_t flat) {
  const size_t nd = g.rank();
  std::vector<int64_t> idx(nd);
  for (size_t i = nd; i-- > 0;) {
    idx[i] = flat % g.in[i];
    flat /= g.in[i];
  }
  // The first spatial dim varies fastest.
  int64_t out = 0, mult = 1;
  for (size_t i = 0; i < nd; ++i) {
    out += idx[i] * mult;
    mult *= g.in[i];
  }
  return out;
}

class MaxPoolKernel : public OpKernel {
 public:
  explicit MaxPoolKernel(const KernelInfo& info) : base_(info.node) {
    storage_order_ = info.node.attr_int("storage_order", 0);
    if (storage_order_ != 0 && storage_order_ != 1) info.node.fail("storage_order must be 0 or 1");
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    Shape out_shape;
    WindowGeometry g = base_.geometry(ctx, x, out_shape);
    Tensor& y = ctx.allocate_output(0, out_shape, x.dtype());
    int64_t* indices = nullptr;
    if (ctx.output_count() > 1 && ctx.output_wanted(1))
      indices = ctx.allocate_output(1, out_shape, DType::Int64).data<int64_t>();
    if (y.numel() == 0) return;
    const int64_t planes = x.dim(0) * x.dim(1), in_size = x.numel() / std::max<int64_t>(planes, 1);
    const int64_t out_size = y.numel() / planes;
    auto run = [&](auto tag) {
      using T = decltype(tag);
      const T* xp = x.data<T>();
      T* yp = y.data<T>();
      for_each_window(ctx.execution(), g, planes,
                      [&](int64_t plane, int64_t o, const int64_t* valid, int64_t n, int64_t) {
                        const T* xs = xp + plane * in_size;
                        T best = std::numeric_limits<T>::lowest();
                        int64_t arg = n > 0 ? valid[0] : 0;
                        for (int64_t i = 0; i < n; ++i)
                          if (xs[valid[i]] > best || (i == 0)) {
                            best = xs[valid[i]];
                            arg = valid[i];
                          }
                        yp[plane * out_size + o] = best;
                        if (indices)
                          indices[plane * out_size + o] =
                              plane * in_size + (storage_order_ == 1 ? column_major(g, arg) : arg);
                      });
    };
    visit_dtype_among<float, double, int8_t, uint8_t>(x.dtype(), run);
  }

 private:
  PoolBase base_;
  int64_t storage_order_ = 0;
};

class AveragePoolKernel : public OpKernel {
 public:
  explicit AveragePoolKernel(const KernelInfo& info) : base_(info.node) {
    count_include_pad_ = info.node.attr_int("count_include_pad", 0) != 0;
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    Shape out_shape;
    WindowGeometry g = base_.geometry(ctx, x, out_shape);
    Tensor& y = ctx.allocate_output(0, out_shape, x.dtype());
    if (y.numel() == 0) return;
    const int64_t planes = x.dim(0) * x.dim(1), in_size = x.numel() / planes;
    const int64_t out_size = y.numel() / planes;
    auto run = [&](auto tag) {
      using T = decltype(tag);
      const T* xp = x.data<T>();
      T* yp = y.data<T>();
      for_each_window(
          ctx.execution(), g, planes,
          [&](int64_t plane, int64_t o, const int64_t* valid, int64_t n, int64_t n_pads) {
            const T* xs = xp + plane * in_size;
            T sum = 0;
            for (int64_t i = 0; i < n; ++i) sum += xs[valid[i]];
            int64_t count = count_include_pad_ ? n_pads : n;
            yp[plane * out_size + o] = count > 0 ? sum / static_cast<T>(count) : T(0);
          });
    };
    visit_dtype_among<float, double>(x.dtype(), run);
  }

 private:
  PoolBase base_;
  bool count_include_pad_ = false;
};

class LpPoolKernel : public OpKernel {
 public:
  explicit LpPoolKernel(const KernelInfo& info) : base_(info.node) {
    p_ = attr_number(info.node, "p", 2.0);
    if (!(p_ > 0)) info.node.fail("p must be positive, got ", p_);
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    Shape out_shape;
    WindowGeometry g = base_.geometry(ctx, x, out_shape);
    Tensor& y = ctx.allocate_output(0, out_shape, x.dtype());
    if (y.numel() == 0) return;
    const int64_t planes = x.dim(0) * x.dim(1), in_size = x.numel() / planes;
    const int64_t out_size = y.numel() / planes;
    auto run = [&](auto tag) {
      using T = decltype(tag);
      const T* xp = x.data<T>();
      T* yp = y.data<T>();
      const T p = static_cast<T>(p_);
      for_each_window(ctx.execution(), g, planes,
                      [&](int64_t plane, int64_t o, const int64_t* valid, int64_t n, int64_t) {
                        const T* xs = xp + plane * in_size;
                        T sum = 0;
                        for (int64_t i = 0; i < n; ++i) sum += std::pow(std::abs(xs[valid[i]]), p);
                        yp[plane * out_size + o] = std::pow(sum, T(1) / p);
                      });
    };
    visit_dtype_among<float, double>(x.dtype(), run);
  }

 private:
  PoolBase base_;
  double p_ = 2;
};

enum class GlobalKind { Max, Average, Lp };

template <class T>
constexpr bool kIs16Bit = std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>;

/// Global pooling: one reduction over all spatial elements of each (batch, channel) plane.
template <GlobalKind Kind>
class GlobalPoolKernel : public OpKernel {
 public:
  explicit GlobalPoolKernel(const KernelInfo& info) {
    if (Kind == GlobalKind::Lp) {
      p_ = attr_number(info.node, "p", 2.0);
      if (!(p_ > 0)) info.node.fail("p must be positive, got ", p_);
    }
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    if (x.rank() < 3)
      ctx.fail("X must have rank >= 3 (N, C, spatial...), got ", shape_to_string(x.shape()));
    Shape out_shape(x.shape().size(), 1);
    out_shape[0] = x.dim(0);
    out_shape[1] = x.dim(1);
    Tensor& y = ctx.allocate_output(0, out_shape, x.dtype());
    const int64_t planes = y.numel();
    if (planes == 0) return;
    const int64_t in_size = x.numel() / planes;
    if (in_size == 0 && Kind == GlobalKind::Max) ctx.fail("GlobalMaxPool over an empty input");
    // Stored as T, computed as C: float for the 16-bit types, each result rounded once.
    auto run = [&](auto tag) {
      using T = decltype(tag);
      using C = std::conditional_t<kIs16Bit<T>, float, T>;
      const T* xp = x.data<T>();
      T* yp = y.data<T>();
      const C p = static_cast<C>(p_);
      ctx.parallel_for(planes, std::max<int64_t>(1, 16384 / std::max<int64_t>(in_size, 1)),
                       [&](int64_t b, int64_t e) {
                         for (int64_t plane = b; plane < e; ++plane) {
                           const T* xs = xp + plane * in_size;
                           C acc = Kind == GlobalKind::Max ? static_cast<C>(xs[0]) : C(0);
                           for (int64_t i = 0; i < in_size; ++i) {
                             const C v = static_cast<C>(xs[i]);
                             if constexpr (Kind == GlobalKind::Max)
                               acc = v > acc ? v : acc;
                             else if constexpr (Kind == GlobalKind::Average)
                               acc += v;
                             else
                               acc += std::pow(std::abs(v), p);
                           }
                           if constexpr (Kind == GlobalKind::Average)
                             acc = in_size ? acc / static_cast<C>(in_size) : C(0);
                           if constexpr (Kind == GlobalKind::Lp) acc = std::pow(acc, C(1) / p);
                           yp[plane] = T(acc);
                         }
                       });
    };
    visit_dtype_among<float, double, Float16, BFloat16>(x.dtype(), run);
  }

 private:
  double p_ = 2;
};

const std::vector<DType> kMaxPoolTypes = {DType::Float32, DType::Float64, DType::Int8,
                                          DType::UInt8};
const std::vector<DType> kGlobalPoolTypes = {DType::Float32, DType::Float64, DType::Float16,
                                             DType::BFloat16};

DPRUN_REGISTER_KERNEL({.op_type = "MaxPool",
                       .since = 1,
                       .dtypes = kMaxPoolTypes,
                       .factory = make_kernel<MaxPoolKernel>});
DPRUN_REGISTER_KERNEL({.op_type = "AveragePool",
                       .since = 1,
                       .dtypes = kFloatTypes,
                       .factory = make_kernel<AveragePoolKernel>});
DPRUN_REGISTER_KERNEL(
    {.op_type = "LpPool", .since = 1, .dtypes = kFloatTypes, .factory = make_kernel<LpPoolKernel>});
DPRUN_REGISTER_KERNEL({.op_type = "GlobalMaxPool",
                       .since = 1,
                       .dtypes = kGlobalPoolTypes,
                       .factory = make_kernel<GlobalPoolKernel<GlobalKind::Max>>});
DPRUN_REGISTER_KERNEL({.op_type = "GlobalAveragePool",
                       .since = 1,
                       .dtypes = kGlobalPoolTypes,
                       .factory = make_kernel<GlobalPoolKernel<GlobalKind::Average>>});
DPRUN_REGISTER_KERNEL({.op_type = "GlobalLpPool",
                       .since = 1,
                       .dtypes = kGlobalPoolTypes,
                       .factory = make_kernel<GlobalPoolKernel<GlobalKind::Lp>>});

}  // namespace
}  // namespace dprun

// The ops' facts (engine/op_facts.h): output types, shapes, 16-bit and layout policy.
namespace dprun {
namespace {
/// 2-D windows over an NHWC value, without MaxPool's Indices (one output): AveragePoolNHWC and
/// MaxPoolNHWC.
bool window_pool_runs_in_nhwc(const LayoutQuery& query) {
  const Node& n = query.node;
  return query.is_nhwc(n.inputs[0]) && n.attr_ints("kernel_shape", {}).size() == 2 &&
         only_first_input(n);
}

bool global_pool_runs_in_nhwc(const LayoutQuery& query) {
  return query.is_nhwc(query.node.inputs[0]);
}

DPRUN_REGISTER_OP_FACTS({.op_type = "AveragePool",
                         .shape = ShapeKind::Pool,
                         .layout = {.runs_in_nhwc = window_pool_runs_in_nhwc,
                                    .to_nhwc = use_nhwc_kernel}});
DPRUN_REGISTER_OP_FACTS({.op_type = "GlobalAveragePool",
                         .shape = ShapeKind::GlobalPool,
                         .layout = {.runs_in_nhwc = global_pool_runs_in_nhwc,
                                    .to_nhwc = use_nhwc_kernel}});
DPRUN_REGISTER_OP_FACTS({.op_type = "GlobalLpPool", .shape = ShapeKind::GlobalPool});
DPRUN_REGISTER_OP_FACTS({.op_type = "GlobalMaxPool", .shape = ShapeKind::GlobalPool});
DPRUN_REGISTER_OP_FACTS({.op_type = "LpPool", .shape = ShapeKind::Pool});
DPRUN_REGISTER_OP_FACTS({.op_type = "MaxPool",
                         .dtype = OutputDTypeRule::fixed_after_first(DType::Int64),
                         .shape = ShapeKind::Pool,
                         .layout = {.runs_in_nhwc = window_pool_runs_in_nhwc,
                                    .to_nhwc = use_nhwc_kernel}});

}  // namespace
}  // namespace dprun
