// Softmax, LogSoftmax, Hardmax over the [outer, D, inner] view of softmax_util.h; inner == 1
// is the contiguous fast path. Softmax subtracts the row maximum before exponentiating so large
// inputs cannot overflow.
#include <cmath>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "engine/half.h"
#include "engine/op_facts.h"
#include "ops/common/reduce_common.h"
#include "ops/cpu/simd_loops.h"
#include "ops/math/unary_functors.h"
#include "ops/softmax/log_softmax.h"
#include "ops/softmax/scaled_softmax.h"
#include "ops/softmax/softmax_row.h"
#include "ops/softmax/softmax_util.h"

namespace dprun {
namespace {

enum class SoftmaxKind { Softmax, LogSoftmax, Hardmax };

/// Maximum and sum of a float32 row in 16 independent lanes, combined at the end: elementwise
/// work that vectorises without reassociation flags (a single accumulator would not).
constexpr int64_t kLanes = 16;

inline float row_max(const float* x, int64_t D) {
  float lane[kLanes];
  for (float& v : lane) v = -std::numeric_limits<float>::infinity();
  int64_t d = 0;
  for (; d + kLanes <= D; d += kLanes)
    for (int64_t j = 0; j < kLanes; ++j) lane[j] = x[d + j] > lane[j] ? x[d + j] : lane[j];
  float mx = lane[0];
  for (int64_t j = 1; j < kLanes; ++j) mx = lane[j] > mx ? lane[j] : mx;
  for (; d < D; ++d) mx = x[d] > mx ? x[d] : mx;
  return mx;
}

/// Sum of f(x[d]) over the row, in kLanes lanes.
template <class F>
inline float row_sum(const float* x, int64_t D, const F& f) {
  float lane[kLanes] = {};
  int64_t d = 0;
  for (; d + kLanes <= D; d += kLanes)
    for (int64_t j = 0; j < kLanes; ++j) lane[j] += f(x[d + j]);
  float sum = 0;
  for (int64_t j = 0; j < kLanes; ++j) sum += lane[j];
  for (; d < D; ++d) sum += f(x[d]);
  return sum;
}

/// One contiguous float32 row of Softmax (times `scale`) or LogSoftmax, compiled per instruction
/// set (simd_loops.h). Separate loops so that each vectorises: the maximum, the exponentials
/// (math::exp_of is a polynomial for float) with their sum, and the scaling.
template <SoftmaxKind K>
DPRUN_SIMD_CLONES void softmax_row_f32(const float* x, float* y, int64_t D, float scale = 1.0f) {
  const float mx = row_max(x, D);
  if constexpr (K == SoftmaxKind::Softmax) {
    for (int64_t d = 0; d < D; ++d) y[d] = math::exp_of(x[d] - mx);
    const float inv = scale / row_sum(y, D, [](float v) { return v; });
    for (int64_t d = 0; d < D; ++d) y[d] *= inv;
  } else {
    const float sum = row_sum(x, D, [mx](float v) { return math::exp_of(v - mx); });
    const float shift = mx + std::log(sum);
    for (int64_t d = 0; d < D; ++d) y[d] = x[d] - shift;
  }
}

// `scale` (Softmax only; null for none): row r's result is multiplied by scale[r].
template <SoftmaxKind K, class T>
void softmax_rows(const ExecutionContext& exec, const T* x, T* y, int64_t rows, int64_t D,
                  const T* scale = nullptr) {
  using C = compute_t<T>;
  exec.parallel_for(
      rows, std::max<int64_t>(1, 4096 / std::max<int64_t>(D, 1)), [&](int64_t begin, int64_t end) {
        // 16-bit rows: widened into `wide`, computed by the float32 row into `out`,
        // narrowed (each step a vectorised loop, engine/half.h).
        std::vector<float> wide(is_half_v<T> ? static_cast<size_t>(D) : 0), out(wide.size());
        for (int64_t r = begin; r < end; ++r) {
          const T* xr = x + r * D;
          T* yr = y + r * D;
          [[maybe_unused]] const C s = scale ? load_as<C>(scale[r]) : C(1);
          if constexpr (K == SoftmaxKind::Hardmax) {
            int64_t best = 0;
            for (int64_t d = 1; d < D; ++d)
              if (load_as<C>(xr[d]) > load_as<C>(xr[best])) best = d;
            for (int64_t d = 0; d < D; ++d) yr[d] = store_as<T>(C(d == best ? 1 : 0));
          } else if constexpr (std::is_same_v<T, float>) {
            softmax_row_f32<K>(xr, yr, D, s);
          } else if constexpr (is_half_v<T>) {
            widen(xr, wide.data(), D);
            softmax_row_f32<K>(wide.data(), out.data(), D, s);
            narrow(out.data(), yr, D);
          } else {  // double
            C mx = -std::numeric_limits<C>::infinity();
#pragma omp simd reduction(max : mx)
            for (int64_t d = 0; d < D; ++d) mx = std::max(mx, xr[d]);
            C sum = 0;
            if constexpr (K == SoftmaxKind::Softmax) {
              // Exponentials go to the output, then one scaling pass; separate loops so both
              // vectorise.
              for (int64_t d = 0; d < D; ++d) yr[d] = math::exp_of(xr[d] - mx);
#pragma omp simd reduction(+ : sum)
              for (int64_t d = 0; d < D; ++d) sum += yr[d];
              const C inv = s / sum;
              for (int64_t d = 0; d < D; ++d) yr[d] *= inv;
            } else {
#pragma omp simd reduction(+ : sum)
              for (int64_t d = 0; d < D; ++d) sum += math::exp_of(xr[d] - mx);
              const C shift = mx + std::log(sum);
              for (int64_t d = 0; d < D; ++d) yr[d] = xr[d] - shift;
            }
          }
        }
      });
}

/// The strided case: the softmax dimension D has stride `inner`; columns are processed in
/// contiguous blocks of the inner dimension. `scale` as softmax_rows', one per column
/// [outer, inner].
template <SoftmaxKind K, class T>
void softmax_strided(const ExecutionContext& exec, const T* x, T* y, int64_t outer, int64_t D,
                     int64_t inner, const T* scale = nullptr) {
  using C = compute_t<T>;
  constexpr int64_t kBlock = 256;
  const int64_t blocks = (inner + kBlock - 1) / kBlock;
  exec.parallel_for(
      outer * blocks, std::max<int64_t>(1, 4096 / std::max<int64_t>(D * kBlock, 1)),
      [&](int64_t begin, int64_t end) {
        std::vector<C> mx(kBlock), sum(kBlock);
        std::vector<int64_t> best(kBlock);
        for (int64_t t = begin; t < end; ++t) {
          const int64_t o = t / blocks, i0 = (t % blocks) * kBlock;
          const int64_t len = std::min(kBlock, inner - i0);
          const T* xb = x + o * D * inner + i0;
          T* yb = y + o * D * inner + i0;
          if constexpr (K == SoftmaxKind::Hardmax) {
            std::fill(best.begin(), best.begin() + len, 0);
            for (int64_t d = 1; d < D; ++d)
              for (int64_t i = 0; i < len; ++i)
                if (load_as<C>(xb[d * inner + i]) > load_as<C>(xb[best[i] * inner + i]))
                  best[i] = d;
            for (int64_t d = 0; d < D; ++d)
              for (int64_t i = 0; i < len; ++i)
                yb[d * inner + i] = store_as<T>(C(best[i] == d ? 1 : 0));
            continue;
          }
          std::fill(mx.begin(), mx.begin() + len, -std::numeric_limits<C>::infinity());
          std::fill(sum.begin(), sum.begin() + len, C(0));
          for (int64_t d = 0; d < D; ++d)
            for (int64_t i = 0; i < len; ++i)
              mx[i] = std::max(mx[i], load_as<C>(xb[d * inner + i]));
          for (int64_t d = 0; d < D; ++d)
            for (int64_t i = 0; i < len; ++i)
              sum[i] += math::exp_of(load_as<C>(xb[d * inner + i]) - mx[i]);
          for (int64_t i = 0; i < len; ++i) {
            if constexpr (K == SoftmaxKind::Softmax)
              sum[i] = (scale ? load_as<C>(scale[o * inner + i0 + i]) : C(1)) / sum[i];
            else
              sum[i] = mx[i] + std::log(sum[i]);
          }
          for (int64_t d = 0; d < D; ++d)
            for (int64_t i = 0; i < len; ++i) {
              const C v = load_as<C>(xb[d * inner + i]);
              if constexpr (K == SoftmaxKind::Softmax)
                yb[d * inner + i] = store_as<T>(math::exp_of(v - mx[i]) * sum[i]);
              else
                yb[d * inner + i] = store_as<T>(v - sum[i]);
            }
        }
      });
}

template <SoftmaxKind K>
class SoftmaxKernel : public OpKernel {
 public:
  explicit SoftmaxKernel(const KernelInfo& info) : axis_(info) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    const SoftmaxDims dims = axis_.dims(ctx, x.shape());
    const int64_t outer = dims.outer, D = dims.d, inner = dims.inner;
    Tensor& y = ctx.allocate_output(0, x.shape(), x.dtype());
    if (x.numel() == 0) return;
    auto run = [&](auto tag) {
      using T = decltype(tag);
      if (inner == 1)
        softmax_rows<K, T>(ctx.execution(), x.data<T>(), y.data<T>(), outer, D);
      else
        softmax_strided<K, T>(ctx.execution(), x.data<T>(), y.data<T>(), outer, D, inner);
    };
    visit_dtype_among<float, double, Float16, BFloat16>(x.dtype(), run);
  }

 private:
  SoftmaxAxis axis_;
};

const std::vector<DType> kSoftmaxTypes = {DType::Float32, DType::Float64, DType::Float16,
                                          DType::BFloat16};

DPRUN_REGISTER_KERNEL({.op_type = "Softmax",
                       .since = 1,
                       .dtypes = kSoftmaxTypes,
                       .factory = make_kernel<SoftmaxKernel<SoftmaxKind::Softmax>>});
DPRUN_REGISTER_KERNEL({.op_type = "LogSoftmax",
                       .since = 1,
                       .dtypes = kSoftmaxTypes,
                       .factory = make_kernel<SoftmaxKernel<SoftmaxKind::LogSoftmax>>});
DPRUN_REGISTER_KERNEL({.op_type = "Hardmax",
                       .since = 1,
                       .dtypes = kSoftmaxTypes,
                       .factory = make_kernel<SoftmaxKernel<SoftmaxKind::Hardmax>>});

}  // namespace

void softmax_row(const float* x, float* y, int64_t D) {
  softmax_row_f32<SoftmaxKind::Softmax>(x, y, D);
}

template <class T>
void log_softmax(const ExecutionContext& exec, const T* x, T* y, int64_t outer, int64_t D,
                 int64_t inner) {
  if (inner == 1)
    softmax_rows<SoftmaxKind::LogSoftmax, T>(exec, x, y, outer, D);
  else
    softmax_strided<SoftmaxKind::LogSoftmax, T>(exec, x, y, outer, D, inner);
}

template void log_softmax<float>(const ExecutionContext&, const float*, float*, int64_t, int64_t,
                                 int64_t);
template void log_softmax<double>(const ExecutionContext&, const double*, double*, int64_t, int64_t,
                                  int64_t);
template void log_softmax<Float16>(const ExecutionContext&, const Float16*, Float16*, int64_t,
                                   int64_t, int64_t);
template void log_softmax<BFloat16>(const ExecutionContext&, const BFloat16*, BFloat16*, int64_t,
                                    int64_t, int64_t);

template <class T>
void scaled_softmax(const ExecutionContext& exec, const T* x, const T* scale, T* y, int64_t outer,
                    int64_t D, int64_t inner) {
  if (inner == 1)
    softmax_rows<SoftmaxKind::Softmax, T>(exec, x, y, outer, D, scale);
  else
    softmax_strided<SoftmaxKind::Softmax, T>(exec, x, y, outer, D, inner, scale);
}

template void scaled_softmax<float>(const ExecutionContext&, const float*, const float*, float*,
                                    int64_t, int64_t, int64_t);
template void scaled_softmax<double>(const ExecutionContext&, const double*, const double*, double*,
                                     int64_t, int64_t, int64_t);

}  // namespace dprun

// The ops' facts (engine/op_facts.h): output types, shapes, 16-bit and layout policy.
namespace dprun {
namespace {
DPRUN_REGISTER_OP_FACTS({.op_type = "Hardmax", .shape = ShapeKind::SameAsInput0});
DPRUN_REGISTER_OP_FACTS({.op_type = "LogSoftmax", .shape = ShapeKind::SameAsInput0});
DPRUN_REGISTER_OP_FACTS({.op_type = "Softmax", .shape = ShapeKind::SameAsInput0});

}  // namespace
}  // namespace dprun
