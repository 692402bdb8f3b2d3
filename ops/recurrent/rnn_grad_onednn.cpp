// LSTMGrad, GRUGrad and RNNGrad (rewrite domain; engine/rewrites/rnn_grad_fusion.h): the whole
// backward pass of one LSTM, GRU or RNN node on oneDNN, float32. Per direction the forward is
// run again in training mode (it leaves the workspace the backward primitive reads), then the
// backward primitive gives the gradients of X, the weights, the biases, the initial states and
// the peepholes at once (ops/recurrent/rnn_onednn.h for the layouts and gate orders).
//
// Inputs: the forward node's X, W, R, B, sequence_lens, initial_h, initial_c, P (absent ones
// empty), then dY, dY_h, dY_c (absent: zeros). Outputs: dX, dW, dR, dB, (none for
// sequence_lens), d initial_h, d initial_c, dP, each computed when wanted.
#include <cstring>

#include "engine/rewrites/rewrite_domain.h"
#include "engine/rewrites/rnn_grad_fusion.h"
#include "ops/recurrent/rnn_onednn.h"

namespace dprun {
namespace {

using dnnl::memory;
using rnn_onednn::Cell;
using rnn_onednn::DirPrimitives;
using rnn_onednn::Operands;
using rnn_onednn::PackedWeights;
using rnn_onednn::Sizes;
using rnn_onednn::Spec;

// The gradients a call writes, null where not wanted, in the ONNX layouts.
struct Grads {
  float *dx = nullptr, *dw = nullptr, *dr = nullptr, *db = nullptr, *dh0 = nullptr, *dc0 = nullptr,
        *dp = nullptr;
};

// A float32 buffer for one call.
std::vector<float> zeros(int64_t n) {
  return std::vector<float>(static_cast<size_t>(n), 0.f);
}

class RnnGradOnednnKernel : public OpKernel {
 public:
  RnnGradOnednnKernel(const KernelInfo& info, Cell cell) {
    std::optional<Spec> spec = Spec::of(info.node, cell);
    if (!spec) info.node.fail("attributes oneDNN does not compute (see rnn_grad_fusion.h)");
    spec_ = std::move(*spec);
  }

  void compute(KernelContext& ctx) const override {
    std::optional<Operands> o = rnn_onednn::read_operands(ctx, spec_);
    if (!o || ctx.input(0).dtype() != DType::Float32)
      ctx.fail(
          "inputs oneDNN's RNN primitives cannot take (float32, full sequences, shapes as "
          "the forward node's)");
    const Sizes& s = o->s;
    const double multiply_adds =
        3.0 * spec_.dirs * s.seq * s.batch * spec_.gates() * s.hidden * (s.in + s.hidden);
    onednn::run_sized(ctx, multiply_adds, [&] { run(ctx, *o); });
  }

 private:
  // Output i, zero-filled, or null when not wanted.
  float* output(KernelContext& ctx, size_t i, const Tensor* like) const {
    if (!like || i >= ctx.output_count() || !ctx.output_wanted(i)) return nullptr;
    Tensor& t = ctx.allocate_output(i, like->shape(), DType::Float32);
    std::memset(t.raw_data(), 0, t.nbytes());
    return t.data<float>();
  }

  // Output gradient `input` (dY, dY_h, dY_c; absent: null), checked against `shape`.
  float* output_grad(KernelContext& ctx, size_t input, const Shape& shape) const {
    const Tensor* g = ctx.optional_input(input);
    if (!g) return nullptr;
    if (g->shape() != shape || g->dtype() != DType::Float32)
      ctx.fail("input ", input, " (an output's gradient) is ", dtype_name(g->dtype()), " ",
               shape_to_string(g->shape()), ", not float32 ", shape_to_string(shape));
    return const_cast<float*>(g->data<float>());  // only read (gathered)
  }

  void run(KernelContext& ctx, const Operands& o) const {
    const Sizes& s = o.s;
    const int64_t T = s.seq, N = s.batch, dirs = spec_.dirs;
    Grads g;
    g.dx = output(ctx, 0, &ctx.input(0));
    g.dw = output(ctx, 1, &ctx.input(1));
    g.dr = output(ctx, 2, &ctx.input(2));
    g.db = output(ctx, 3, ctx.optional_input(3));
    g.dh0 = output(ctx, 5, ctx.optional_input(5));
    if (spec_.cell == Cell::Lstm) {
      g.dc0 = output(ctx, 6, ctx.optional_input(6));
      g.dp = output(ctx, 7, ctx.optional_input(7));
    }
    std::vector<float> x, dx = zeros(T * N * s.in);
    rnn_onednn::sequence_rows(spec_, s, 1, 0, s.in, const_cast<float*>(o.x->data<float>()), x,
                              true);  // X is only read
    for (int64_t d = 0; d < dirs; ++d) direction(ctx, o, x.data(), d, g, dx);
    rnn_onednn::sequence_rows(spec_, s, 1, 0, s.in, g.dx, dx, false);
  }

  // Direction d: forward training, backward, and its share of the gradients (dX summed in
  // `dx`, [seq, batch, in]).
  void direction(KernelContext& ctx, const Operands& o, const float* x, int64_t d, Grads& g,
                 std::vector<float>& dx) const {
    const Sizes& s = o.s;
    const int64_t T = s.seq, N = s.batch, H = s.hidden;
    const bool lstm = spec_.cell == Cell::Lstm, peephole = o.p != nullptr;
    auto p = cache_.get({T, N, s.in, H, d, peephole},
                        [&] { return rnn_onednn::make_primitives(spec_, s, d, peephole, true); });
    PackedWeights w;
    rnn_onednn::pack_weights(spec_, s, d, o.w, o.r, o.b, o.p, w);
    std::vector<float> h0, c0;
    rnn_onednn::state_rows(spec_, s, d, const_cast<float*>(o.h0), h0, true);  // only read
    rnn_onednn::state_rows(spec_, s, d, const_cast<float*>(o.c0), c0, true);
    std::vector<float> y = zeros(T * N * H), hn = zeros(N * H), cn = zeros(N * H);
    // The workspace (megabytes) is kept by the thread between calls: a new one each call costs
    // its pages' first-touch faults, and the forward overwrites what the backward reads.
    thread_local std::vector<char> workspace;
    if (workspace.size() < p->workspace.get_size()) workspace.resize(p->workspace.get_size());
    auto wrap = onednn::wrap;
    const memory wl_user = wrap(p->wl_user, w.wl.data()), wi_user = wrap(p->wi_user, w.wi.data());
    std::unordered_map<int, memory> args = {
        {DNNL_ARG_SRC_LAYER, wrap(p->src_layer, x)},
        {DNNL_ARG_SRC_ITER, wrap(p->src_iter, h0.data())},
        {DNNL_ARG_WEIGHTS_LAYER, onednn::to_layout(wl_user, p->wl)},
        {DNNL_ARG_WEIGHTS_ITER, onednn::to_layout(wi_user, p->wi)},
        {DNNL_ARG_BIAS, wrap(p->bias, w.bias.data())},
        {DNNL_ARG_DST_LAYER, wrap(p->dst_layer, y.data())},
        {DNNL_ARG_DST_ITER, wrap(p->dst_iter, hn.data())},
        {DNNL_ARG_WORKSPACE, wrap(p->workspace, workspace.data())}};
    if (lstm) {
      args[DNNL_ARG_SRC_ITER_C] = wrap(p->src_iter_c, c0.data());
      args[DNNL_ARG_DST_ITER_C] = wrap(p->dst_iter_c, cn.data());
      if (peephole) args[DNNL_ARG_WEIGHTS_PEEPHOLE] = wrap(p->peephole, w.peephole.data());
    }
    onednn::execute(p->fwd, p->fwd_scratchpad, args);

    // Backward: the forward's arguments (weights in the backward's layouts), the output
    // gradients, and zeroed gradients of everything else.
    const Shape state = rnn_onednn::state_shape(spec_, s);
    std::vector<float> dy, dhn, dcn;
    rnn_onednn::sequence_rows(spec_, s, spec_.dirs, d, H,
                              output_grad(ctx, 8, rnn_onednn::y_shape(spec_, s)), dy, true);
    rnn_onednn::state_rows(spec_, s, d, output_grad(ctx, 9, state), dhn, true);
    rnn_onednn::state_rows(spec_, s, d, lstm ? output_grad(ctx, 10, state) : nullptr, dcn, true);
    std::vector<float> dsrc = zeros(T * N * s.in), dh0 = zeros(N * H), dc0 = zeros(N * H);
    PackedWeights dw;
    dw.bias = zeros(spec_.bias_gates() * H);
    dw.peephole = zeros(3 * H);
    memory dwl(p->diff_wl, onednn::cpu_engine()), dwi(p->diff_wi, onednn::cpu_engine());
    std::memset(dwl.get_data_handle(), 0, p->diff_wl.get_size());
    std::memset(dwi.get_data_handle(), 0, p->diff_wi.get_size());
    args[DNNL_ARG_WEIGHTS_LAYER] = onednn::to_layout(wl_user, p->bwd_wl);
    args[DNNL_ARG_WEIGHTS_ITER] = onednn::to_layout(wi_user, p->bwd_wi);
    args[DNNL_ARG_DIFF_SRC_LAYER] = wrap(p->src_layer, dsrc.data());
    args[DNNL_ARG_DIFF_SRC_ITER] = wrap(p->src_iter, dh0.data());
    args[DNNL_ARG_DIFF_WEIGHTS_LAYER] = dwl;
    args[DNNL_ARG_DIFF_WEIGHTS_ITER] = dwi;
    args[DNNL_ARG_DIFF_BIAS] = wrap(p->bias, dw.bias.data());
    args[DNNL_ARG_DIFF_DST_LAYER] = wrap(p->dst_layer, dy.data());
    args[DNNL_ARG_DIFF_DST_ITER] = wrap(p->dst_iter, dhn.data());
    if (lstm) {
      args[DNNL_ARG_DIFF_SRC_ITER_C] = wrap(p->src_iter_c, dc0.data());
      args[DNNL_ARG_DIFF_DST_ITER_C] = wrap(p->dst_iter_c, dcn.data());
      if (peephole) args[DNNL_ARG_DIFF_WEIGHTS_PEEPHOLE] = wrap(p->peephole, dw.peephole.data());
    }
    onednn::execute(p->bwd, p->bwd_scratchpad, std::move(args));

    // The weights' gradients in ldigo, then in ONNX's order.
    auto ldigo = [](const memory& m, const memory::desc& user, std::vector<float>& out) {
      const memory plain = onednn::to_layout(m, user);  // m itself when already ldigo
      const auto* data = static_cast<const float*>(plain.get_data_handle());
      out.assign(data, data + user.get_size() / sizeof(float));
    };
    ldigo(dwl, p->wl_user, dw.wl);
    ldigo(dwi, p->wi_user, dw.wi);
    rnn_onednn::unpack_gradients(spec_, s, d, dw, g.dw, g.dr, g.db, g.dp);
    for (size_t k = 0; k < dx.size(); ++k) dx[k] += dsrc[k];
    rnn_onednn::state_rows(spec_, s, d, g.dh0, dh0, false);
    rnn_onednn::state_rows(spec_, s, d, g.dc0, dc0, false);
  }

  Spec spec_;
  onednn::ShapeCache<DirPrimitives> cache_;
};

template <Cell C>
std::unique_ptr<OpKernel> make_rnn_grad(const KernelInfo& info) {
  return std::make_unique<RnnGradOnednnKernel>(info, C);
}

DPRUN_REGISTER_KERNEL({.domain = kRewriteDomain,
                       .op_type = "LSTMGrad",
                       .dtypes = {DType::Float32},
                       .priority = 10,
                       .impl = "onednn",
                       .factory = make_rnn_grad<Cell::Lstm>});
DPRUN_REGISTER_KERNEL({.domain = kRewriteDomain,
                       .op_type = "GRUGrad",
                       .dtypes = {DType::Float32},
                       .priority = 10,
                       .impl = "onednn",
                       .factory = make_rnn_grad<Cell::Gru>});
DPRUN_REGISTER_KERNEL({.domain = kRewriteDomain,
                       .op_type = "RNNGrad",
                       .dtypes = {DType::Float32},
                       .priority = 10,
                       .impl = "onednn",
                       .factory = make_rnn_grad<Cell::Rnn>});

}  // namespace
}  // namespace dprun
