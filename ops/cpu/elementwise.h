#pragma once
// The elementwise CPU kernels' machinery: contiguous and broadcasting maps over the run's
// threads (float32 runs through the vectorised loops of simd_loops.h, 16-bit floats widened to
// float in blocks), and the unary and binary kernel classes. The dtype policies, value
// conversion and broadcasting's rules and plan, which every device shares, are in
// ops/common/elementwise.h.
#include <algorithm>
#include <array>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "engine/half.h"
#include "engine/kernel.h"
#include "ops/common/elementwise.h"
#include "ops/cpu/simd_loops.h"
#include "ops/math/make_functor.h"

namespace dprun::ew {

/// Elements per parallel chunk: small tensors stay on one thread.
inline constexpr int64_t kGrain = 1 << 15;

/// out[i] = f(in[i]) over n contiguous elements, in parallel chunks.
template <class TI, class TO, class F>
void unary_map(const ExecutionContext& exec, const TI* in, TO* out, int64_t n, const F& f) {
  exec.parallel_for(n, kGrain, [&](int64_t begin, int64_t end) {
    if constexpr (std::is_same_v<TI, float> && std::is_same_v<TO, float>)
      simd::map(f, in + begin, out + begin, end - begin);
    else
      for (int64_t i = begin; i < end; ++i) out[i] = f(in[i]);
  });
}

/// Elements per block of the 16-bit maps below: widened into float buffers on the stack,
/// computed by the float32 loops, narrowed (each step a vectorised loop, engine/half.h).
inline constexpr int64_t kHalfBlock = 512;

/// out[i] = in[i] widened to float32, in parallel chunks.
template <class T>
void widen_map(const ExecutionContext& exec, const T* in, float* out, int64_t n) {
  exec.parallel_for(
      n, kGrain, [&](int64_t begin, int64_t end) { widen(in + begin, out + begin, end - begin); });
}

/// out[i] = in[i] rounded to the 16-bit T, in parallel chunks.
template <class T>
void narrow_map(const ExecutionContext& exec, const float* in, T* out, int64_t n) {
  exec.parallel_for(
      n, kGrain, [&](int64_t begin, int64_t end) { narrow(in + begin, out + begin, end - begin); });
}

/// out[i] = f(in[i]) for a 16-bit T: f computes in float on widened values, each result rounded
/// once to T. `out` may be `in`.
template <class T, class F>
void half_unary_map(const ExecutionContext& exec, const T* in, T* out, int64_t n, const F& f) {
  exec.parallel_for(n, kGrain, [&](int64_t begin, int64_t end) {
    float block[kHalfBlock];
    for (int64_t b = begin; b < end; b += kHalfBlock) {
      const int64_t len = std::min(kHalfBlock, end - b);
      widen(in + b, block, len);
      simd::map(f, block, block, len);
      narrow(block, out + b, len);
    }
  });
}

/// Runs block(out_offset, in_offsets, inner_strides, length) over contiguous runs covering the
/// output, split into parallel chunks of about kGrain elements.
template <size_t N, class Block>
void run_plan(const ExecutionContext& exec, const BroadcastPlan<N>& plan, const Block& block) {
  if (plan.total == 0) return;
  const int64_t inner = plan.dims.back();
  const size_t outer_rank = plan.dims.size() - 1;
  std::array<int64_t, N> inner_stride;
  for (size_t k = 0; k < N; ++k) inner_stride[k] = plan.strides[k].back();
  exec.parallel_for(plan.total, kGrain, [&](int64_t begin, int64_t end) {
    std::vector<int64_t> index(outer_rank, 0);
    std::array<int64_t, N> base{};
    int64_t outer = begin / inner;
    int64_t j = begin % inner;
    for (size_t d = outer_rank; d-- > 0;) {
      index[d] = outer % plan.dims[d];
      outer /= plan.dims[d];
      for (size_t k = 0; k < N; ++k) base[k] += index[d] * plan.strides[k][d];
    }
    int64_t pos = begin;
    while (pos < end) {
      const int64_t len = std::min(inner - j, end - pos);
      std::array<int64_t, N> offs;
      for (size_t k = 0; k < N; ++k) offs[k] = base[k] + j * inner_stride[k];
      block(pos, offs, inner_stride, len);
      pos += len;
      j = 0;
      for (size_t d = outer_rank; d-- > 0;) {
        ++index[d];
        for (size_t k = 0; k < N; ++k) base[k] += plan.strides[k][d];
        if (index[d] < plan.dims[d]) break;
        for (size_t k = 0; k < N; ++k) base[k] -= plan.strides[k][d] * plan.dims[d];
        index[d] = 0;
      }
    }
  });
}

/// z[i] = f(x, y) for i < n, x and y each a run of n values (`x_runs`, `y_runs`) or one value
/// broadcast; all-float runs go to the vectorised loops (simd_loops.h).
template <class TA, class TB, class TO, class F>
void map2_run(const F& f, const TA* x, bool x_runs, const TB* y, bool y_runs, TO* z, int64_t n) {
  if constexpr (std::is_same_v<TA, float> && std::is_same_v<TB, float> &&
                std::is_same_v<TO, float>) {
    if (x_runs && y_runs) return simd::map2(f, x, y, z, n);
    if (x_runs) return simd::map2_scalar_b(f, x, *y, z, n);
    if (y_runs) return simd::map2_scalar_a(f, *x, y, z, n);
  }
  if (x_runs && y_runs) {
    for (int64_t i = 0; i < n; ++i) z[i] = f(x[i], y[i]);
  } else if (x_runs) {
    const TB yv = *y;
    for (int64_t i = 0; i < n; ++i) z[i] = f(x[i], yv);
  } else if (y_runs) {
    const TA xv = *x;
    for (int64_t i = 0; i < n; ++i) z[i] = f(xv, y[i]);
  } else {
    const TO v = f(*x, *y);
    for (int64_t i = 0; i < n; ++i) z[i] = v;
  }
}

/// out = f(a, b) with a and b broadcast to out's shape (which must already be allocated).
template <class TA, class TB, class TO, class F>
void binary_map(const ExecutionContext& exec, const Tensor& a, const Tensor& b, Tensor& out,
                const F& f) {
  const auto plan = make_plan<2>(out.shape(), {&a.shape(), &b.shape()});
  const TA* pa = static_cast<const TA*>(a.raw_data());
  const TB* pb = static_cast<const TB*>(b.raw_data());
  TO* po = static_cast<TO*>(out.raw_data());
  run_plan(exec, plan,
           [&](int64_t o, const std::array<int64_t, 2>& offs, const std::array<int64_t, 2>& st,
               int64_t n) {
             map2_run(f, pa + offs[0], st[0] != 0, pb + offs[1], st[1] != 0, po + o, n);
           });
}

/// out = f(a, b) for 16-bit a, b and out, broadcast as binary_map: f computes in float on
/// widened runs of the operands, each result rounded once to T.
template <class T, class F>
void half_binary_map(const ExecutionContext& exec, const Tensor& a, const Tensor& b, Tensor& out,
                     const F& f) {
  const auto plan = make_plan<2>(out.shape(), {&a.shape(), &b.shape()});
  const T* pa = static_cast<const T*>(a.raw_data());
  const T* pb = static_cast<const T*>(b.raw_data());
  T* po = static_cast<T*>(out.raw_data());
  run_plan(exec, plan,
           [&](int64_t o, const std::array<int64_t, 2>& offs, const std::array<int64_t, 2>& st,
               int64_t n) {
             float x[kHalfBlock], y[kHalfBlock], z[kHalfBlock];
             for (int64_t k = 0; k < n; k += kHalfBlock) {
               const int64_t len = std::min(kHalfBlock, n - k);
               // A run of an operand, or its one broadcast value (stride 0) in x[0] or y[0].
               widen(pa + offs[0] + (st[0] ? k : 0), x, st[0] ? len : 1);
               widen(pb + offs[1] + (st[1] ? k : 0), y, st[1] ? len : 1);
               map2_run(f, x, st[0] != 0, y, st[1] != 0, z, len);
               narrow(z, po + o + k, len);
             }
           });
}

/// A copy of `t` as float32 (t must be a floating type).
inline Tensor to_float32(const ExecutionContext& exec, const Tensor& t) {
  if (t.dtype() == DType::Float32) return t;
  Tensor out = Tensor::empty(t.shape(), DType::Float32, t.device());
  float* o = out.data<float>();
  visit_dtype(t.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (is_half_v<T>)
      widen_map(exec, t.data<T>(), o, t.numel());
    else
      unary_map(exec, t.data<T>(), o, t.numel(), [](T v) { return convert<float>(v); });
  });
  return out;
}

/// Writes float32 `src` into `dst` (same element count), converting to dst's dtype.
inline void from_float32(const ExecutionContext& exec, const Tensor& src, Tensor& dst) {
  const float* s = src.data<float>();
  visit_dtype(dst.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (is_half_v<T>)
      narrow_map(exec, s, dst.data<T>(), src.numel());
    else
      unary_map(exec, s, dst.data<T>(), src.numel(), [](float v) { return convert<T>(v); });
  });
}

/// Unary elementwise kernel: y = op(x), or a bool result when kBoolOut.
template <class Op, Types kT, bool kBoolOut = false>
class UnaryKernel : public OpKernel {
 public:
  explicit UnaryKernel(const KernelInfo& info) : op_(make_functor<Op>(info)) {}
  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    Tensor& y = kBoolOut ? ctx.allocate_output(0, x.shape(), DType::Bool)
                         : ctx.allocate_output_reusing(0, 0, x.shape(), x.dtype());
    const Op op = op_;
    visit_dtype(x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      if constexpr (!accepts<kT, T>()) {
        fail_dtype(ctx, x.dtype());
      } else {
        using O = std::conditional_t<kBoolOut, bool, T>;
        if constexpr (is_half_v<T> && !kBoolOut) {
          half_unary_map(ctx.execution(), x.data<T>(), y.data<T>(), x.numel(), op);
        } else if constexpr (is_half_v<T>) {
          unary_map(ctx.execution(), x.data<T>(), y.data<O>(), x.numel(),
                    [op](T v) { return O(op(static_cast<float>(v))); });
        } else {
          unary_map(ctx.execution(), x.data<T>(), y.data<O>(), x.numel(),
                    [op](T v) { return static_cast<O>(op(v)); });
        }
      }
    });
  }

 private:
  Op op_;
};

/// Whether an integer op must reject a zero right operand (division, modulo).
template <class Op>
inline constexpr bool kNeedsNonzeroDivisor = false;

/// Binary elementwise kernel with numpy broadcasting (legacy broadcast/axis before opset 7).
template <class Op, Types kT, bool kBoolOut = false>
class BinaryKernel : public OpKernel {
  /// The output, written over A or B when one of them has its shape and dies here (binary_map
  /// reads each element of a full-shape operand before writing the same position).
  static Tensor& allocate_binary_output(KernelContext& ctx, const Tensor& a, Shape shape) {
    if (kBoolOut) return ctx.allocate_output(0, std::move(shape), DType::Bool);
    const size_t over = ctx.input_reusable(0, shape, a.dtype()) ? 0 : 1;
    return ctx.allocate_output_reusing(0, over, std::move(shape), a.dtype());
  }

 public:
  explicit BinaryKernel(const KernelInfo& info)
      : op_(make_functor<Op>(info)), legacy_(is_legacy_broadcast(info)) {}
  void compute(KernelContext& ctx) const override {
    const Tensor& a = ctx.input(0);
    // A reference, not a copy, so that B's memory stays sole-owned and may take the output.
    Tensor aligned_b;
    const Tensor& b = legacy_ ? (aligned_b = legacy_align(ctx, a, ctx.input(1))) : ctx.input(1);
    if (a.dtype() != b.dtype())
      ctx.fail("inputs have different dtypes ", dtype_name(a.dtype()), " and ",
               dtype_name(b.dtype()));
    Shape out_shape = broadcast_all(ctx, {&a.shape(), &b.shape()});
    Tensor& out = allocate_binary_output(ctx, a, std::move(out_shape));
    const Op op = op_;
    visit_dtype(a.dtype(), [&](auto tag) {
      using T = decltype(tag);
      if constexpr (!accepts<kT, T>()) {
        fail_dtype(ctx, a.dtype());
      } else {
        using O = std::conditional_t<kBoolOut, bool, T>;
        if constexpr (is_half_v<T> && !kBoolOut) {
          half_binary_map<T>(ctx.execution(), a, b, out, op);
        } else if constexpr (is_half_v<T>) {
          binary_map<T, T, O>(ctx.execution(), a, b, out, [op](T x, T y) {
            return O(op(static_cast<float>(x), static_cast<float>(y)));
          });
        } else {
          if constexpr (kNeedsNonzeroDivisor<Op> && std::is_integral_v<T>) {
            const T* d = b.data<T>();
            if (std::find(d, d + b.numel(), T(0)) != d + b.numel())
              ctx.fail("integer division by zero");
          }
          binary_map<T, T, O>(ctx.execution(), a, b, out,
                              [op](T x, T y) { return static_cast<O>(op(x, y)); });
        }
      }
    });
  }

 private:
  Op op_;
  bool legacy_;
};

}  // namespace dprun::ew
