// RNN, GRU and LSTM (every opset; `layout` from 14).
//
// Inputs: X [seq, batch, in] (layout 1: [batch, seq, in]), W [dirs, G*H, in], R [dirs, G*H, H],
// B [dirs, 2*G*H] (input biases then recurrence biases), sequence_lens [batch], initial_h (and
// for LSTM initial_c) [dirs, batch, H] (layout 1: [batch, dirs, H]), LSTM peepholes P
// [dirs, 3*H]. Gate order: LSTM i, o, f, c; GRU z, r, h. The input projection of every time
// step is computed as one matrix product up front; each step then adds H_{t-1} * R^T. Steps at
// or beyond a batch entry's sequence length write zeros to Y and leave its state unchanged.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <string>
#include <vector>

#include "engine/autograd/shape_rules.h"
#include "engine/op_facts.h"
#include "ops/common/reduce_common.h"

namespace dprun {
namespace {

enum class RnnKind { Rnn, Gru, Lstm };

/// One activation function with its alpha/beta, as named by the ONNX RNN spec.
struct Activation {
  enum class Kind {
    Relu,
    Tanh,
    Sigmoid,
    Affine,
    LeakyRelu,
    ThresholdedRelu,
    ScaledTanh,
    HardSigmoid,
    Elu,
    Softsign,
    Softplus
  };
  Kind kind = Kind::Tanh;
  double alpha = 0, beta = 0;

  template <class T>
  T operator()(T x) const {
    switch (kind) {
      case Kind::Relu:
        return x > T(0) ? x : T(0);
      case Kind::Tanh:
        return std::tanh(x);
      case Kind::Sigmoid:
        return T(1) / (T(1) + std::exp(-x));
      case Kind::Affine:
        return T(alpha) * x + T(beta);
      case Kind::LeakyRelu:
        return x >= T(0) ? x : T(alpha) * x;
      case Kind::ThresholdedRelu:
        return x > T(alpha) ? x : T(0);
      case Kind::ScaledTanh:
        return T(alpha) * std::tanh(T(beta) * x);
      case Kind::HardSigmoid:
        return std::max(T(0), std::min(T(1), T(alpha) * x + T(beta)));
      case Kind::Elu:
        return x >= T(0) ? x : T(alpha) * (std::exp(x) - T(1));
      case Kind::Softsign:
        return x / (T(1) + std::abs(x));
      case Kind::Softplus:
        return std::log1p(std::exp(x));
    }
    return x;
  }
};

/// Parses `activations` with their alpha/beta values. Alphas and betas are consumed in order
/// by the activations that take them; missing ones use the function's default.
std::vector<Activation> parse_activations(const Node& node, size_t per_dir, int64_t dirs,
                                          const std::vector<std::string>& defaults) {
  std::vector<std::string> names;
  if (node.has_attr("activations")) names = node.attr_strings("activations");
  if (names.empty())
    for (int64_t d = 0; d < dirs; ++d) names.insert(names.end(), defaults.begin(), defaults.end());
  // One direction's list given for a bidirectional node is used for both.
  if (dirs == 2 && names.size() == per_dir) {
    std::vector<std::string> twice = names;
    twice.insert(twice.end(), names.begin(), names.end());
    names = twice;
  }
  if (names.size() != per_dir * static_cast<size_t>(dirs))
    node.fail("expected ", per_dir * static_cast<size_t>(dirs), " activations, got ", names.size());
  std::vector<float> alphas = node.attr_floats("activation_alpha", {});
  std::vector<float> betas = node.attr_floats("activation_beta", {});
  size_t ai = 0, bi = 0;
  auto next = [](const std::vector<float>& v, size_t& i, double fallback) {
    return i < v.size() ? static_cast<double>(v[i++]) : fallback;
  };
  std::vector<Activation> out;
  for (const auto& raw : names) {
    std::string n = raw;
    std::transform(n.begin(), n.end(), n.begin(),
                   [](unsigned char ch) { return std::tolower(ch); });
    Activation a;
    using K = Activation::Kind;
    if (n == "relu") {
      a.kind = K::Relu;
    } else if (n == "tanh") {
      a.kind = K::Tanh;
    } else if (n == "sigmoid") {
      a.kind = K::Sigmoid;
    } else if (n == "affine") {
      a.kind = K::Affine;
      a.alpha = next(alphas, ai, 1.0);
      a.beta = next(betas, bi, 0.0);
    } else if (n == "leakyrelu") {
      a.kind = K::LeakyRelu;
      a.alpha = next(alphas, ai, 0.01);
    } else if (n == "thresholdedrelu") {
      a.kind = K::ThresholdedRelu;
      a.alpha = next(alphas, ai, 1.0);
    } else if (n == "scaledtanh") {
      a.kind = K::ScaledTanh;
      a.alpha = next(alphas, ai, 1.0);
      a.beta = next(betas, bi, 1.0);
    } else if (n == "hardsigmoid") {
      a.kind = K::HardSigmoid;
      a.alpha = next(alphas, ai, 0.2);
      a.beta = next(betas, bi, 0.5);
    } else if (n == "elu") {
      a.kind = K::Elu;
      a.alpha = next(alphas, ai, 1.0);
    } else if (n == "softsign") {
      a.kind = K::Softsign;
    } else if (n == "softplus") {
      a.kind = K::Softplus;
    } else {
      node.fail("unsupported activation '", raw, "'");
    }
    out.push_back(a);
  }
  return out;
}

/// c[m, n] (+)= sum_k a[m, k] * b[n, k]  (b used transposed).
template <class T>
void gemm_nt(const ExecutionContext& exec, int64_t m, int64_t n, int64_t k, const T* a, const T* b,
             T* c, bool accumulate) {
  exec.parallel_for(m, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, k * n)),
                    [&](int64_t begin, int64_t end) {
                      for (int64_t i = begin; i < end; ++i) {
                        const T* ar = a + i * k;
                        T* cr = c + i * n;
                        for (int64_t j = 0; j < n; ++j) {
                          const T* br = b + j * k;
                          T s = 0;
                          for (int64_t p = 0; p < k; ++p) s += ar[p] * br[p];
                          cr[j] = accumulate ? cr[j] + s : s;
                        }
                      }
                    });
}

/// The sizes of one run: sequence length, batch, input size, hidden size H, G = gates * H, and
/// the shape of initial_h, initial_c, Y_h and Y_c.
struct RnnDims {
  int64_t seq = 0, batch = 0, in = 0, H = 0, G = 0;
  Shape state_shape;
};

/// The node's inputs; the optional ones are nullptr where omitted.
struct RnnInputs {
  const Tensor& x;
  const Tensor& w;
  const Tensor& r;
  const Tensor* b;
  const Tensor* lens;
  const Tensor* h0;
  const Tensor* c0;
  const Tensor* p;
};

/// What the recurrence of one direction reads besides the input projections.
template <class T>
struct DirectionParams {
  const T* r;             // R [G, H]
  const T* rb;            // recurrence biases [G]; nullptr without B
  const T* p;             // peepholes [3 * H]; nullptr without P
  const Activation* act;  // the direction's activations
  bool rev;               // runs from the end of each sequence
};

template <RnnKind K>
class RnnKernel : public OpKernel {
 public:
  static constexpr int64_t kGates = K == RnnKind::Rnn ? 1 : K == RnnKind::Gru ? 3 : 4;

  explicit RnnKernel(const KernelInfo& info) {
    const Node& node = info.node;
    hidden_ = node.attr_int("hidden_size", 0);
    std::string dir = node.attr_string("direction", "forward");
    if (dir == "forward")
      dirs_ = 1;
    else if (dir == "reverse")
      dirs_ = 1, reverse_ = true;
    else if (dir == "bidirectional")
      dirs_ = 2;
    else
      node.fail("direction must be forward, reverse or bidirectional, got '", dir, "'");
    layout_ = node.attr_int("layout", 0);
    if (layout_ != 0 && layout_ != 1) node.fail("layout must be 0 or 1, got ", layout_);
    if (node.has_attr("clip")) {
      clip_ = node.attr_float("clip");
      if (clip_ <= 0) node.fail("clip must be positive, got ", clip_);
    }
    if constexpr (K == RnnKind::Rnn) {
      acts_ = parse_activations(node, 1, dirs_, {"Tanh"});
    } else if constexpr (K == RnnKind::Gru) {
      acts_ = parse_activations(node, 2, dirs_, {"Sigmoid", "Tanh"});
      linear_before_reset_ = node.attr_int("linear_before_reset", 0) != 0;
    } else {
      acts_ = parse_activations(node, 3, dirs_, {"Sigmoid", "Tanh", "Tanh"});
      input_forget_ = node.attr_int("input_forget", 0) != 0;
    }
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    switch (x.dtype()) {
      case DType::Float32:
        return run<float>(ctx);
      case DType::Float64:
        return run<double>(ctx);
      default:
        ctx.fail("unsupported dtype ", dtype_name(x.dtype()));
    }
  }

 private:
  template <class T>
  void run(KernelContext& ctx) const {
    const RnnInputs in = node_inputs(ctx);
    const RnnDims dims = check_inputs(ctx, in);
    const std::vector<int64_t> lens = sequence_lengths(ctx, in.lens, dims);
    const std::vector<T> xs = sequence_major_input<T>(in.x, dims);

    // Outputs in the internal [seq, dirs, batch, H] / [dirs, batch, H] layouts.
    std::vector<T> y(static_cast<size_t>(dims.seq * dirs_ * dims.batch * dims.H), T(0));
    std::vector<T> yh(static_cast<size_t>(dirs_ * dims.batch * dims.H), T(0));
    std::vector<T> yc(static_cast<size_t>(dirs_ * dims.batch * dims.H), T(0));
    for (int64_t d = 0; d < dirs_; ++d) run_direction<T>(ctx, in, dims, d, lens, xs, y, yh, yc);

    if (ctx.output_wanted(0)) write_sequence_output<T>(ctx, in.x.dtype(), dims, y);
    write_state_output<T>(ctx, in.x.dtype(), dims, 1, yh);
    if constexpr (K == RnnKind::Lstm) write_state_output<T>(ctx, in.x.dtype(), dims, 2, yc);
  }

  /// The node's inputs; initial_c and P are LSTM's only.
  RnnInputs node_inputs(const KernelContext& ctx) const {
    return {ctx.input(0),
            ctx.input(1),
            ctx.input(2),
            ctx.optional_input(3),
            ctx.optional_input(4),
            ctx.optional_input(5),
            K == RnnKind::Lstm ? ctx.optional_input(6) : nullptr,
            K == RnnKind::Lstm ? ctx.optional_input(7) : nullptr};
  }

  /// Checks every input's shape and dtype against X's and returns the run's sizes.
  RnnDims check_inputs(const KernelContext& ctx, const RnnInputs& inputs) const {
    const Tensor& x = inputs.x;
    const Tensor& w = inputs.w;
    if (x.rank() != 3) ctx.fail("X must have rank 3, got ", shape_to_string(x.shape()));
    const int64_t seq = layout_ == 0 ? x.dim(0) : x.dim(1);
    const int64_t batch = layout_ == 0 ? x.dim(1) : x.dim(0);
    const int64_t in = x.dim(2);
    const int64_t gh_rows = w.rank() == 3 ? w.dim(1) : -1;
    const int64_t H = hidden_ > 0 ? hidden_ : (gh_rows > 0 ? gh_rows / kGates : 0);
    const int64_t G = kGates * H;
    auto check_shape = [&](const Tensor* t, const Shape& want, const char* what) {
      if (!t) return;
      if (t->shape() != want)
        ctx.fail(what, " must have shape ", shape_to_string(want), ", got ",
                 shape_to_string(t->shape()));
      if (t->dtype() != x.dtype() && std::string(what) != "sequence_lens")
        ctx.fail(what, " dtype ", dtype_name(t->dtype()), " differs from X dtype ",
                 dtype_name(x.dtype()));
    };
    check_shape(&w, {dirs_, G, in}, "W");
    check_shape(&inputs.r, {dirs_, G, H}, "R");
    check_shape(inputs.b, {dirs_, 2 * G}, "B");
    check_shape(inputs.lens, {batch}, "sequence_lens");
    Shape state_shape = layout_ == 0 ? Shape{dirs_, batch, H} : Shape{batch, dirs_, H};
    check_shape(inputs.h0, state_shape, "initial_h");
    check_shape(inputs.c0, state_shape, "initial_c");
    check_shape(inputs.p, {dirs_, 3 * H}, "P");
    return RnnDims{seq, batch, in, H, G, std::move(state_shape)};
  }

  /// sequence_lens, checked; the whole sequence for every batch entry where it is omitted.
  static std::vector<int64_t> sequence_lengths(const KernelContext& ctx, const Tensor* lens_t,
                                               const RnnDims& dims) {
    std::vector<int64_t> lens(static_cast<size_t>(dims.batch), dims.seq);
    if (lens_t) {
      lens = read_int_list(ctx, *lens_t, "sequence_lens");
      for (int64_t l : lens)
        if (l < 0 || l > dims.seq)
          ctx.fail("sequence_lens value ", l, " is outside [0, ", dims.seq, "]");
    }
    return lens;
  }

  /// X as [seq, batch, in].
  template <class T>
  std::vector<T> sequence_major_input(const Tensor& x, const RnnDims& dims) const {
    const int64_t seq = dims.seq, batch = dims.batch, in = dims.in;
    std::vector<T> xs(static_cast<size_t>(seq * batch * in));
    const T* xp = x.data<T>();
    for (int64_t t = 0; t < seq; ++t)
      for (int64_t n = 0; n < batch; ++n) {
        const T* src = layout_ == 0 ? xp + (t * batch + n) * in : xp + (n * seq + t) * in;
        std::copy(src, src + in, xs.data() + (t * batch + n) * in);
      }
    return xs;
  }

  /// Index of (direction d, batch entry n, unit j) in a state input or output.
  int64_t state_index(const RnnDims& dims, int64_t d, int64_t n, int64_t j) const {
    return layout_ == 0 ? (d * dims.batch + n) * dims.H + j : (n * dirs_ + d) * dims.H + j;
  }

  template <class T>
  T clip(T v) const {
    return clip_ > 0 ? std::clamp(v, T(-clip_), T(clip_)) : v;
  }

  /// Direction d over the whole sequence, into Y's direction-d slices and the final states'.
  template <class T>
  void run_direction(const KernelContext& ctx, const RnnInputs& in, const RnnDims& dims, int64_t d,
                     const std::vector<int64_t>& lens, const std::vector<T>& xs, std::vector<T>& y,
                     std::vector<T>& yh, std::vector<T>& yc) const {
    const int64_t G = dims.G, H = dims.H;
    const size_t per_dir = acts_.size() / static_cast<size_t>(dirs_);
    const T* wd = in.w.data<T>() + d * G * dims.in;
    const T* wb = in.b ? in.b->data<T>() + d * 2 * G : nullptr;
    const DirectionParams<T> dir{in.r.data<T>() + d * G * H, in.b ? wb + G : nullptr,
                                 in.p ? in.p->data<T>() + d * 3 * H : nullptr,
                                 acts_.data() + static_cast<size_t>(d) * per_dir,
                                 reverse_ || d == 1};
    const std::vector<T> xw = project_inputs<T>(ctx, dims, xs, wd, wb, dir.rb);
    std::vector<T> h(static_cast<size_t>(dims.batch * H), T(0)), c(h.size(), T(0));
    load_initial_state<T>(in, dims, d, h, c);
    run_steps<T>(ctx, dims, dir, d, lens, xw, h, c, y);
    store_final_state<T>(dims, d, h, c, yh, yc);
  }

  /// Input projections of every step, with the biases that are added unconditionally.
  template <class T>
  std::vector<T> project_inputs(const KernelContext& ctx, const RnnDims& dims,
                                const std::vector<T>& xs, const T* wd, const T* wb,
                                const T* rb) const {
    const int64_t rows = dims.seq * dims.batch, G = dims.G, H = dims.H;
    std::vector<T> xw(static_cast<size_t>(rows * G));
    gemm_nt<T>(ctx.execution(), rows, G, dims.in, xs.data(), wd, xw.data(), false);
    if (wb)
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t g = 0; g < G; ++g) {
          T add = wb[g];
          // GRU keeps the recurrence bias of the h gate separate (it is scaled by r).
          if (!(K == RnnKind::Gru && g >= 2 * H)) add += rb[g];
          xw[static_cast<size_t>(i * G + g)] += add;
        }
    return xw;
  }

  /// Direction d's initial_h / initial_c into h / c ([batch, H]), where given.
  template <class T>
  void load_initial_state(const RnnInputs& in, const RnnDims& dims, int64_t d, std::vector<T>& h,
                          std::vector<T>& c) const {
    const int64_t H = dims.H;
    for (int64_t n = 0; n < dims.batch; ++n)
      for (int64_t j = 0; j < H; ++j) {
        if (in.h0) h[static_cast<size_t>(n * H + j)] = in.h0->data<T>()[state_index(dims, d, n, j)];
        if (in.c0) c[static_cast<size_t>(n * H + j)] = in.c0->data<T>()[state_index(dims, d, n, j)];
      }
  }

  /// The recurrence: each step adds H_{t-1} * R^T to the step's input projection and runs the
  /// cell of every batch entry still within its sequence; the others keep their state.
  template <class T>
  void run_steps(const KernelContext& ctx, const RnnDims& dims, const DirectionParams<T>& dir,
                 int64_t d, const std::vector<int64_t>& lens, const std::vector<T>& xw,
                 std::vector<T>& h, std::vector<T>& c, std::vector<T>& y) const {
    const int64_t seq = dims.seq, batch = dims.batch, H = dims.H, G = dims.G;
    std::vector<T> hr(static_cast<size_t>(batch * G));
    for (int64_t step = 0; step < seq; ++step) {
      gemm_nt<T>(ctx.execution(), batch, G, H, h.data(), dir.r, hr.data(), false);
      for (int64_t n = 0; n < batch; ++n) {
        const int64_t len = lens[static_cast<size_t>(n)];
        if (step >= len) continue;
        const int64_t t = dir.rev ? len - 1 - step : step;
        const T* xg = xw.data() + (t * batch + n) * G;
        const T* hg = hr.data() + n * G;
        T* hn = h.data() + n * H;
        T* cn = c.data() + n * H;
        if constexpr (K == RnnKind::Rnn) {
          rnn_cell<T>(H, dir, xg, hg, hn);
        } else if constexpr (K == RnnKind::Gru) {
          gru_cell<T>(H, dir, xg, hg, hn);
        } else {
          lstm_cell<T>(H, dir, xg, hg, hn, cn);
        }
        std::copy(hn, hn + H, y.data() + ((t * dirs_ + d) * batch + n) * H);
      }
    }
  }

  /// One RNN step of one batch entry: hn = f(x W^T + h R^T + biases).
  template <class T>
  void rnn_cell(int64_t H, const DirectionParams<T>& dir, const T* xg, const T* hg, T* hn) const {
    const Activation* act = dir.act;
    for (int64_t j = 0; j < H; ++j) hn[j] = act[0](clip(xg[j] + hg[j]));
  }

  /// One GRU step of one batch entry (gates z, r, h): hn = (1 - z) * candidate + z * hn.
  template <class T>
  void gru_cell(int64_t H, const DirectionParams<T>& dir, const T* xg, const T* hg, T* hn) const {
    const Activation* act = dir.act;
    std::vector<T> zv(static_cast<size_t>(H)), rv(static_cast<size_t>(H));
    for (int64_t j = 0; j < H; ++j) {
      zv[j] = act[0](clip(xg[j] + hg[j]));
      rv[j] = act[0](clip(xg[H + j] + hg[H + j]));
    }
    const T* rbh = dir.rb ? dir.rb + 2 * H : nullptr;
    std::vector<T> cand(static_cast<size_t>(H));
    if (linear_before_reset_) {
      for (int64_t j = 0; j < H; ++j)
        cand[j] = act[1](clip(xg[2 * H + j] + rv[j] * (hg[2 * H + j] + (rbh ? rbh[j] : T(0)))));
    } else {
      // (r * H_{t-1}) * Rh^T needs its own product.
      std::vector<T> rhn(static_cast<size_t>(H));
      for (int64_t j = 0; j < H; ++j) rhn[j] = rv[j] * hn[j];
      for (int64_t j = 0; j < H; ++j) {
        const T* rrow = dir.r + (2 * H + j) * H;
        T s = 0;
        for (int64_t p = 0; p < H; ++p) s += rhn[p] * rrow[p];
        cand[j] = act[1](clip(xg[2 * H + j] + s + (rbh ? rbh[j] : T(0))));
      }
    }
    for (int64_t j = 0; j < H; ++j) hn[j] = (T(1) - zv[j]) * cand[j] + zv[j] * hn[j];
  }

  /// One LSTM step of one batch entry (gates i, o, f, c, with peepholes where given).
  template <class T>
  void lstm_cell(int64_t H, const DirectionParams<T>& dir, const T* xg, const T* hg, T* hn,
                 T* cn) const {
    const Activation* act = dir.act;
    const T* pd = dir.p;
    for (int64_t j = 0; j < H; ++j) {
      const T cp = cn[j];
      T ig = xg[j] + hg[j] + (pd ? pd[j] * cp : T(0));
      T fg = xg[2 * H + j] + hg[2 * H + j] + (pd ? pd[2 * H + j] * cp : T(0));
      const T i_v = act[0](clip(ig));
      const T f_v = input_forget_ ? T(1) - i_v : act[0](clip(fg));
      const T g_v = act[1](clip(xg[3 * H + j] + hg[3 * H + j]));
      const T c_new = f_v * cp + i_v * g_v;
      T og = xg[H + j] + hg[H + j] + (pd ? pd[H + j] * c_new : T(0));
      const T o_v = act[0](clip(og));
      cn[j] = c_new;
      hn[j] = o_v * act[2](c_new);
    }
  }

  /// Direction d's final h / c into the internal [dirs, batch, H] Y_h / Y_c.
  template <class T>
  void store_final_state(const RnnDims& dims, int64_t d, const std::vector<T>& h,
                         const std::vector<T>& c, std::vector<T>& yh, std::vector<T>& yc) const {
    const int64_t batch = dims.batch, H = dims.H;
    for (int64_t n = 0; n < batch; ++n)
      for (int64_t j = 0; j < H; ++j) {
        yh[static_cast<size_t>((d * batch + n) * H + j)] = h[static_cast<size_t>(n * H + j)];
        yc[static_cast<size_t>((d * batch + n) * H + j)] = c[static_cast<size_t>(n * H + j)];
      }
  }

  /// Y in the node's layout from the internal [seq, dirs, batch, H] one.
  template <class T>
  void write_sequence_output(KernelContext& ctx, DType dtype, const RnnDims& dims,
                             const std::vector<T>& y) const {
    const int64_t seq = dims.seq, batch = dims.batch, H = dims.H;
    Shape ys = layout_ == 0 ? Shape{seq, dirs_, batch, H} : Shape{batch, seq, dirs_, H};
    T* o = ctx.allocate_output(0, ys, dtype).data<T>();
    for (int64_t t = 0; t < seq; ++t)
      for (int64_t d = 0; d < dirs_; ++d)
        for (int64_t n = 0; n < batch; ++n) {
          const T* src = y.data() + ((t * dirs_ + d) * batch + n) * H;
          T* dst = layout_ == 0 ? o + ((t * dirs_ + d) * batch + n) * H
                                : o + ((n * seq + t) * dirs_ + d) * H;
          std::copy(src, src + H, dst);
        }
  }

  /// Output idx (Y_h or Y_c), where wanted, in the node's layout from the internal
  /// [dirs, batch, H] one.
  template <class T>
  void write_state_output(KernelContext& ctx, DType dtype, const RnnDims& dims, size_t idx,
                          const std::vector<T>& s) const {
    if (!ctx.output_wanted(idx)) return;
    T* o = ctx.allocate_output(idx, dims.state_shape, dtype).data<T>();
    for (int64_t d = 0; d < dirs_; ++d)
      for (int64_t n = 0; n < dims.batch; ++n)
        for (int64_t j = 0; j < dims.H; ++j)
          o[state_index(dims, d, n, j)] = s[static_cast<size_t>((d * dims.batch + n) * dims.H + j)];
  }

  int64_t hidden_ = 0;
  int64_t dirs_ = 1;
  bool reverse_ = false;
  int64_t layout_ = 0;
  float clip_ = 0;
  bool linear_before_reset_ = false;
  bool input_forget_ = false;
  std::vector<Activation> acts_;
};

DPRUN_REGISTER_KERNEL({.op_type = "RNN",
                       .since = 1,
                       .dtypes = kFloatTypes,
                       .factory = make_kernel<RnnKernel<RnnKind::Rnn>>});
DPRUN_REGISTER_KERNEL({.op_type = "GRU",
                       .since = 1,
                       .dtypes = kFloatTypes,
                       .factory = make_kernel<RnnKernel<RnnKind::Gru>>});
DPRUN_REGISTER_KERNEL({.op_type = "LSTM",
                       .since = 1,
                       .dtypes = kFloatTypes,
                       .factory = make_kernel<RnnKernel<RnnKind::Lstm>>});

}  // namespace
}  // namespace dprun

// The ops' facts (engine/op_facts.h): output types, shapes, 16-bit and layout policy.
namespace dprun {
namespace {

// Y [seq, dirs, batch, H] (layout 1: [batch, seq, dirs, H]), the states [dirs, batch, H]
// (layout 1: [batch, dirs, H]); seq and batch from X, H from hidden_size.
std::optional<SymbolicShape> recurrent_shape(const ShapeQuery& q) {
  auto x = q.input(0);
  if (!x || x->size() != 3) return std::nullopt;
  const Node& node = q.node;
  const bool batch_first = node.attr_int("layout", 0) == 1;
  const Dim seq = (*x)[batch_first ? 1 : 0], batch = (*x)[batch_first ? 0 : 1];
  const Dim dirs = Dim::known(node.attr_string("direction", "forward") == "bidirectional" ? 2 : 1);
  const Dim hidden =
      node.has_attr("hidden_size") ? Dim::known(node.attr_int("hidden_size")) : Dim{};
  if (q.output == 0)
    return batch_first ? SymbolicShape{batch, seq, dirs, hidden}
                       : SymbolicShape{seq, dirs, batch, hidden};
  return batch_first ? SymbolicShape{batch, dirs, hidden} : SymbolicShape{dirs, batch, hidden};
}

DPRUN_REGISTER_OP_FACTS({.op_type = "GRU", .shape_rule = recurrent_shape});
DPRUN_REGISTER_OP_FACTS({.op_type = "LSTM", .shape_rule = recurrent_shape});
DPRUN_REGISTER_OP_FACTS({.op_type = "RNN", .shape_rule = recurrent_shape});

}  // namespace
}  // namespace dprun
