// RNN, GRU and LSTM forward on oneDNN's recurrent primitives (float32; ops/recurrent/rnn_onednn.h
// for the layouts and gate orders). Nodes whose attributes oneDNN does not cover (activations
// other than the defaults and RNN's Relu, clip, input_forget) are declined at plan time and run
// on the reference kernel (rnn.cpp); so are, per call, inputs it cannot take: sequence_lens
// shorter than the sequence anywhere, empty dims, and shapes the reference rejects (it
// reports them). Primitives are cached per shape and direction.
#include <cstring>

#include "ops/recurrent/rnn_onednn.h"

namespace dprun {
namespace {

using dnnl::memory;
using rnn_onednn::Cell;
using rnn_onednn::DirPrimitives;
using rnn_onednn::Operands;
using rnn_onednn::Sizes;
using rnn_onednn::Spec;

class RnnOnednnKernel : public OpKernel {
 public:
  RnnOnednnKernel(const KernelInfo& info, Spec spec)
      : reference_(onednn::make_reference(info)), spec_(std::move(spec)) {}

  void compute(KernelContext& ctx) const override {
    if (ctx.input(0).dtype() != DType::Float32) return reference_->compute(ctx);
    std::optional<Operands> o = rnn_onednn::read_operands(ctx, spec_);
    if (!o) return reference_->compute(ctx);
    const Sizes& s = o->s;
    const double multiply_adds = static_cast<double>(spec_.dirs) * s.seq * s.batch * spec_.gates() *
                                 s.hidden * (s.in + s.hidden);
    onednn::run_sized(ctx, multiply_adds, [&] { run(ctx, *o); });
  }

 private:
  void run(KernelContext& ctx, const Operands& o) const {
    const Sizes& s = o.s;
    const int64_t H = s.hidden, T = s.seq, N = s.batch;
    auto output = [&](size_t i, const Shape& shape) -> float* {
      if (i >= ctx.output_count() || !ctx.output_wanted(i)) return nullptr;
      return ctx.allocate_output(i, shape, DType::Float32).data<float>();
    };
    float* y = output(0, rnn_onednn::y_shape(spec_, s));
    float* yh = output(1, rnn_onednn::state_shape(spec_, s));
    float* yc = spec_.cell == Cell::Lstm ? output(2, rnn_onednn::state_shape(spec_, s)) : nullptr;
    std::vector<float> x, h0, c0, dst(static_cast<size_t>(T * N * H)), hn(N * H), cn(N * H);
    // Inputs are only read: gathering does not write them.
    rnn_onednn::sequence_rows(spec_, s, 1, 0, s.in, const_cast<float*>(o.x->data<float>()), x,
                              true);
    rnn_onednn::PackedWeights packed;
    for (int64_t d = 0; d < spec_.dirs; ++d) {
      const bool peephole = o.p != nullptr;
      auto p = cache_.get({T, N, s.in, H, d, peephole}, [&] {
        return rnn_onednn::make_primitives(spec_, s, d, peephole, false);
      });
      rnn_onednn::pack_weights(spec_, s, d, o.w, o.r, o.b, o.p, packed);
      rnn_onednn::state_rows(spec_, s, d, const_cast<float*>(o.h0), h0, true);
      rnn_onednn::state_rows(spec_, s, d, const_cast<float*>(o.c0), c0, true);
      auto wrap = onednn::wrap;
      std::unordered_map<int, memory> args = {
          {DNNL_ARG_SRC_LAYER, wrap(p->src_layer, x.data())},
          {DNNL_ARG_SRC_ITER, wrap(p->src_iter, h0.data())},
          {DNNL_ARG_WEIGHTS_LAYER, onednn::to_layout(wrap(p->wl_user, packed.wl.data()), p->wl)},
          {DNNL_ARG_WEIGHTS_ITER, onednn::to_layout(wrap(p->wi_user, packed.wi.data()), p->wi)},
          {DNNL_ARG_BIAS, wrap(p->bias, packed.bias.data())},
          {DNNL_ARG_DST_LAYER, wrap(p->dst_layer, dst.data())},
          {DNNL_ARG_DST_ITER, wrap(p->dst_iter, hn.data())}};
      if (spec_.cell == Cell::Lstm) {
        args[DNNL_ARG_SRC_ITER_C] = wrap(p->src_iter_c, c0.data());
        args[DNNL_ARG_DST_ITER_C] = wrap(p->dst_iter_c, cn.data());
        if (peephole) args[DNNL_ARG_WEIGHTS_PEEPHOLE] = wrap(p->peephole, packed.peephole.data());
      }
      onednn::execute(p->fwd, p->fwd_scratchpad, std::move(args));
      rnn_onednn::sequence_rows(spec_, s, spec_.dirs, d, H, y, dst, false);
      rnn_onednn::state_rows(spec_, s, d, yh, hn, false);
      rnn_onednn::state_rows(spec_, s, d, yc, cn, false);
    }
  }

  std::unique_ptr<OpKernel> reference_;
  Spec spec_;
  onednn::ShapeCache<DirPrimitives> cache_;
};

template <Cell C>
std::unique_ptr<OpKernel> make_rnn_onednn(const KernelInfo& info) {
  std::optional<Spec> spec = Spec::of(info.node, C);
  if (!spec) return nullptr;  // the reference kernel runs it
  return std::make_unique<RnnOnednnKernel>(info, std::move(*spec));
}

DPRUN_REGISTER_KERNEL({.op_type = "RNN",
                       .since = 1,
                       .dtypes = {DType::Float32},
                       .priority = 10,
                       .impl = "onednn",
                       .factory = make_rnn_onednn<Cell::Rnn>});
DPRUN_REGISTER_KERNEL({.op_type = "GRU",
                       .since = 1,
                       .dtypes = {DType::Float32},
                       .priority = 10,
                       .impl = "onednn",
                       .factory = make_rnn_onednn<Cell::Gru>});
DPRUN_REGISTER_KERNEL({.op_type = "LSTM",
                       .since = 1,
                       .dtypes = {DType::Float32},
                       .priority = 10,
                       .impl = "onednn",
                       .factory = make_rnn_onednn<Cell::Lstm>});

}  // namespace
}  // namespace dprun
