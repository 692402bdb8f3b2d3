// DFT, STFT and MelWeightMatrix.
//
// Signals carry a trailing dimension of 1 (real) or 2 (complex). The transforms are direct
// O(n^2) sums in double precision: X[k] = sum_j x[j] exp(-+2 pi i j k / n), the inverse
// divided by n. "onesided" keeps the n/2 + 1 non-redundant bins of a real signal's spectrum.
#include <cmath>
#include <complex>
#include <numbers>
#include <utility>
#include <vector>

#include "engine/op_facts.h"
#include "ops/common/reduce_common.h"

namespace dprun {
namespace {

template <class F>
void visit_signal_dtype(const KernelContext& ctx, DType t, F&& f) {
  visit_floating_dtype(ctx, t, std::forward<F>(f), "unsupported signal dtype ", dtype_name(t));
}

/// out[k] for k < bins from in[j] for j < n (direct transform).
void dft_1d(const std::vector<std::complex<double>>& in, int64_t n, int64_t bins, bool inverse,
            std::vector<std::complex<double>>& out) {
  const double sign = inverse ? 1.0 : -1.0;
  for (int64_t k = 0; k < bins; ++k) {
    std::complex<double> acc = 0;
    for (int64_t j = 0; j < n; ++j) {
      const int64_t jk = (j * k) % n;  // exact phase for large indices
      const double ph =
          sign * 2 * std::numbers::pi * static_cast<double>(jk) / static_cast<double>(n);
      acc += in[static_cast<size_t>(j)] * std::complex<double>(std::cos(ph), std::sin(ph));
    }
    out[static_cast<size_t>(k)] = inverse ? acc / static_cast<double>(n) : acc;
  }
}

class DftKernel : public OpKernel {
 public:
  explicit DftKernel(const KernelInfo& info) : opset_(info.opset) {
    inverse_ = info.node.attr_int("inverse", 0) != 0;
    onesided_ = info.node.attr_int("onesided", 0) != 0;
    axis_ = info.node.attr_int("axis", opset_ >= 20 ? -2 : 1);
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    const int64_t r = x.rank();
    if (r < 2 || (x.dim(-1) != 1 && x.dim(-1) != 2))
      ctx.fail("input must be [..., 1] (real) or [..., 2] (complex), got ",
               shape_to_string(x.shape()));
    int64_t axis = axis_;
    if (opset_ >= 20)
      if (const Tensor* a = ctx.optional_input(2); a && a->numel() > 0)
        axis = read_int_scalar(ctx, *a, "axis");
    if (axis < -r || axis >= r - 1 || axis == -1)
      ctx.fail("axis ", axis, " is out of range for input rank ", r);
    if (axis < 0) axis += r;
    const int64_t len = x.dim(axis);
    int64_t n = len;
    if (const Tensor* d = ctx.optional_input(1); d && d->numel() > 0) {
      n = read_int_scalar(ctx, *d, "dft_length");
      if (n <= 0) ctx.fail("dft_length must be positive, got ", n);
    }
    const bool complex_in = x.dim(-1) == 2;
    if (onesided_ && complex_in) ctx.fail("onesided requires a real input");
    if (onesided_ && inverse_) ctx.fail("onesided is not supported for the inverse transform");
    const int64_t bins = onesided_ ? n / 2 + 1 : n;
    Shape out_shape = x.shape();
    out_shape[static_cast<size_t>(axis)] = bins;
    out_shape.back() = 2;
    const int64_t outer = dims_product(x.shape(), 0, axis);
    const int64_t inner = dims_product(x.shape(), axis + 1, r - 1);
    const int64_t ch = x.dim(-1);
    Tensor& y = ctx.allocate_output(0, out_shape, x.dtype());
    visit_signal_dtype(ctx, x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const T* xs = x.data<T>();
      T* out = y.data<T>();
      ctx.parallel_for(outer * inner, 1, [&](int64_t begin, int64_t end) {
        std::vector<std::complex<double>> in(static_cast<size_t>(n)),
            res(static_cast<size_t>(bins));
        for (int64_t t = begin; t < end; ++t) {
          const int64_t o = t / inner, i = t % inner;
          for (int64_t j = 0; j < n; ++j) {
            if (j >= len) {
              in[static_cast<size_t>(j)] = 0;
              continue;
            }
            const T* p = xs + ((o * len + j) * inner + i) * ch;
            in[static_cast<size_t>(j)] = {load_as<double>(p[0]),
                                          complex_in ? load_as<double>(p[1]) : 0.0};
          }
          dft_1d(in, n, bins, inverse_, res);
          for (int64_t k = 0; k < bins; ++k) {
            T* q = out + ((o * bins + k) * inner + i) * 2;
            q[0] = store_as<T>(static_cast<compute_t<T>>(res[static_cast<size_t>(k)].real()));
            q[1] = store_as<T>(static_cast<compute_t<T>>(res[static_cast<size_t>(k)].imag()));
          }
        }
      });
    });
  }

 private:
  int64_t opset_;
  bool inverse_ = false, onesided_ = false;
  int64_t axis_ = 1;
};

class StftKernel : public OpKernel {
 public:
  explicit StftKernel(const KernelInfo& info) {
    onesided_ = info.node.attr_int("onesided", 1) != 0;
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    if (x.rank() != 3 || (x.dim(2) != 1 && x.dim(2) != 2))
      ctx.fail("signal must be [batch, length, 1 or 2], got ", shape_to_string(x.shape()));
    const int64_t step = read_int_scalar(ctx, ctx.input(1), "frame_step");
    if (step <= 0) ctx.fail("frame_step must be positive, got ", step);
    const Tensor* window = ctx.optional_input(2);
    if (window && window->numel() == 0) window = nullptr;
    int64_t fl = -1;
    if (const Tensor* f = ctx.optional_input(3); f && f->numel() > 0)
      fl = read_int_scalar(ctx, *f, "frame_length");
    if (window) {
      if (window->rank() != 1)
        ctx.fail("window must be 1-D, got ", shape_to_string(window->shape()));
      if (fl >= 0 && fl != window->dim(0))
        ctx.fail("frame_length ", fl, " differs from the window length ", window->dim(0));
      fl = window->dim(0);
    }
    if (fl <= 0) ctx.fail("frame_length or window is required and must be positive");
    const int64_t B = x.dim(0), len = x.dim(1), ch = x.dim(2);
    if (fl > len) ctx.fail("frame_length ", fl, " exceeds the signal length ", len);
    if (onesided_ && ch == 2) ctx.fail("onesided requires a real signal");
    const int64_t frames = (len - fl) / step + 1;
    const int64_t bins = onesided_ ? fl / 2 + 1 : fl;
    std::vector<double> win(static_cast<size_t>(fl), 1.0);
    if (window)
      for (int64_t i = 0; i < fl; ++i) win[static_cast<size_t>(i)] = window->item_as_double(i);
    Tensor& y = ctx.allocate_output(0, {B, frames, bins, 2}, x.dtype());
    visit_signal_dtype(ctx, x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const T* xs = x.data<T>();
      T* out = y.data<T>();
      ctx.parallel_for(B * frames, 1, [&](int64_t begin, int64_t end) {
        std::vector<std::complex<double>> in(static_cast<size_t>(fl)),
            res(static_cast<size_t>(bins));
        for (int64_t t = begin; t < end; ++t) {
          const int64_t b = t / frames, f = t % frames;
          for (int64_t j = 0; j < fl; ++j) {
            const T* p = xs + (b * len + f * step + j) * ch;
            in[static_cast<size_t>(j)] =
                std::complex<double>(load_as<double>(p[0]), ch == 2 ? load_as<double>(p[1]) : 0.0) *
                win[static_cast<size_t>(j)];
          }
          dft_1d(in, fl, bins, false, res);
          for (int64_t k = 0; k < bins; ++k) {
            out[(t * bins + k) * 2] =
                store_as<T>(static_cast<compute_t<T>>(res[static_cast<size_t>(k)].real()));
            out[(t * bins + k) * 2 + 1] =
                store_as<T>(static_cast<compute_t<T>>(res[static_cast<size_t>(k)].imag()));
          }
        }
      });
    });
  }

 private:
  bool onesided_ = true;
};

/// Triangular mel filters mapping dft_length / 2 + 1 linear-frequency bins to num_mel_bins.
class MelWeightMatrixKernel : public OpKernel {
 public:
  explicit MelWeightMatrixKernel(const KernelInfo& info) {
    out_type_ = static_cast<DType>(info.node.attr_int("output_datatype", 1));
    if (!is_floating(out_type_) && !is_integral(out_type_))
      info.node.fail("unsupported output_datatype ", static_cast<int>(out_type_));
  }

  void compute(KernelContext& ctx) const override {
    const int64_t mels = read_int_scalar(ctx, ctx.input(0), "num_mel_bins");
    const int64_t dft_length = read_int_scalar(ctx, ctx.input(1), "dft_length");
    const int64_t rate = read_int_scalar(ctx, ctx.input(2), "sample_rate");
    const double lo = ctx.input(3).item_as_double(0), hi = ctx.input(4).item_as_double(0);
    if (mels <= 0 || dft_length <= 0 || rate <= 0)
      ctx.fail("num_mel_bins, dft_length and sample_rate must be positive");
    if (lo < 0 || hi <= lo) ctx.fail("need 0 <= lower_edge_hertz < upper_edge_hertz");
    const int64_t spec_bins = dft_length / 2 + 1;
    auto to_mel = [](double hz) { return 2595.0 * std::log10(1.0 + hz / 700.0); };
    const double lo_mel = to_mel(lo), hi_mel = to_mel(hi);
    const double step = (hi_mel - lo_mel) / static_cast<double>(mels + 2);
    std::vector<int64_t> edge(static_cast<size_t>(mels + 2));
    for (int64_t i = 0; i < mels + 2; ++i) {
      const double mel = static_cast<double>(i) * step + lo_mel;
      const double hz = 700.0 * (std::pow(10.0, mel / 2595.0) - 1.0);
      edge[static_cast<size_t>(i)] = static_cast<int64_t>(
          std::floor(static_cast<double>(dft_length + 1) * hz / static_cast<double>(rate)));
    }
    std::vector<double> w(static_cast<size_t>(spec_bins * mels), 0.0);
    auto set = [&](int64_t j, int64_t i, double v) {
      if (j >= 0 && j < spec_bins) w[static_cast<size_t>(j * mels + i)] = v;
    };
    for (int64_t i = 0; i < mels; ++i) {
      const int64_t l = edge[static_cast<size_t>(i)], c = edge[static_cast<size_t>(i + 1)],
                    h = edge[static_cast<size_t>(i + 2)];
      if (c == l)
        set(c, i, 1.0);
      else
        for (int64_t j = l; j <= c; ++j)
          set(j, i, static_cast<double>(j - l) / static_cast<double>(c - l));
      if (h > c)
        for (int64_t j = c; j < h; ++j)
          set(j, i, static_cast<double>(h - j) / static_cast<double>(h - c));
    }
    Tensor& y = ctx.allocate_output(0, {spec_bins, mels}, out_type_);
    visit_dtype(out_type_, [&](auto tag) {
      using T = decltype(tag);
      T* out = y.data<T>();
      for (size_t i = 0; i < w.size(); ++i) out[i] = store_as<T>(static_cast<compute_t<T>>(w[i]));
    });
  }

 private:
  DType out_type_ = DType::Float32;
};

DPRUN_REGISTER_KERNEL({.op_type = "DFT",
                       .since = 17,
                       .dtypes = {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16},
                       .factory = make_kernel<DftKernel>});
DPRUN_REGISTER_KERNEL({.op_type = "STFT",
                       .since = 17,
                       .dtypes = {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16},
                       .factory = make_kernel<StftKernel>});
DPRUN_REGISTER_KERNEL({.op_type = "MelWeightMatrix",
                       .since = 17,
                       .dtypes = {DType::Int32, DType::Int64},
                       .factory = make_kernel<MelWeightMatrixKernel>});

}  // namespace
}  // namespace dprun

// The ops' facts (engine/op_facts.h): output types, shapes, 16-bit and layout policy.
namespace dprun {
namespace {
DPRUN_REGISTER_OP_FACTS({.op_type = "DFT"});
DPRUN_REGISTER_OP_FACTS({.op_type = "MelWeightMatrix"});
DPRUN_REGISTER_OP_FACTS({.op_type = "STFT"});

}  // namespace
}  // namespace dprun
