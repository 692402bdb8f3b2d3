// The oneDNN side of RNN, GRU and LSTM (ops/recurrent/rnn_onednn.h): which nodes it runs, its
// primitives, and the ONNX weights in its layouts.
#include <algorithm>
#include <string>

#include "engine/rewrites/rnn_grad_fusion.h"
#include "ops/common/reduce_common.h"
#include "ops/recurrent/rnn_onednn.h"

namespace dprun::rnn_onednn {
namespace {

using dnnl::memory;
using tag = memory::format_tag;
constexpr auto f32 = memory::data_type::f32;

memory::desc plain(const memory::dims& dims, tag format) {
  return memory::desc(dims, f32, format);
}
memory::desc any(const memory::dims& dims) {
  return memory::desc(dims, f32, tag::any);
}

// The descriptors every primitive of one direction shares.
struct Descs {
  memory::desc src_layer, src_iter, src_iter_c, wl, wi, peephole, bias, dst_layer, dst_iter,
      dst_iter_c;
};

Descs descs(const Spec& spec, const Sizes& s, bool peephole, bool any_weights) {
  const int64_t G = spec.gates(), H = s.hidden;
  Descs d;
  d.src_layer = plain({s.seq, s.batch, s.in}, tag::tnc);
  d.src_iter = plain({1, 1, s.batch, H}, tag::ldnc);
  d.dst_layer = plain({s.seq, s.batch, H}, tag::tnc);
  d.dst_iter = plain({1, 1, s.batch, H}, tag::ldnc);
  if (spec.cell == Cell::Lstm) {
    d.src_iter_c = plain({1, 1, s.batch, H}, tag::ldnc);
    d.dst_iter_c = plain({1, 1, s.batch, H}, tag::ldnc);
  }
  if (peephole) d.peephole = plain({1, 1, 3, H}, tag::ldgo);
  d.bias = plain({1, 1, spec.bias_gates(), H}, tag::ldgo);
  d.wl = any_weights ? any({1, 1, s.in, G, H}) : plain({1, 1, s.in, G, H}, tag::ldigo);
  d.wi = any_weights ? any({1, 1, H, G, H}) : plain({1, 1, H, G, H}, tag::ldigo);
  return d;
}

const char* op_name(Cell cell) {
  return cell == Cell::Lstm ? "LSTM" : cell == Cell::Gru ? "GRU" : "RNN";
}

constexpr int64_t kPeephole[3] = {0, 2, 1};  // oneDNN i f o <- ONNX i o f

dnnl::algorithm activation(bool relu) {
  return relu ? dnnl::algorithm::eltwise_relu : dnnl::algorithm::eltwise_tanh;
}

// Builds the forward primitive (and with `training` the backward one) of a cell type.
template <class Fwd, class Bwd, class MakeFwdDesc, class MakeBwdDesc>
void build(DirPrimitives& p, bool training, MakeFwdDesc make_fwd, MakeBwdDesc make_bwd) {
  const dnnl::primitive_attr attr = onednn::concurrent_attr();
  auto fwd_pd = typename Fwd::primitive_desc(make_fwd(), attr, onednn::cpu_engine());
  p.fwd = Fwd(fwd_pd);
  p.fwd_scratchpad = fwd_pd.scratchpad_desc();
  p.wl = fwd_pd.weights_layer_desc();
  p.wi = fwd_pd.weights_iter_desc();
  if (!training) return;
  p.workspace = fwd_pd.workspace_desc();
  auto bwd_pd = typename Bwd::primitive_desc(make_bwd(), attr, onednn::cpu_engine(), fwd_pd);
  p.bwd = Bwd(bwd_pd);
  p.bwd_scratchpad = bwd_pd.scratchpad_desc();
  p.bwd_wl = bwd_pd.weights_layer_desc();
  p.bwd_wi = bwd_pd.weights_iter_desc();
  p.diff_wl = bwd_pd.diff_weights_layer_desc();
  p.diff_wi = bwd_pd.diff_weights_iter_desc();
}

}  // namespace

std::optional<Spec> Spec::of(const Node& node, Cell cell) {
  Spec spec;
  spec.cell = cell;
  const std::string dir = node.attr_string("direction", "forward");
  if (dir == "reverse")
    spec.reverse = true;
  else if (dir == "bidirectional")
    spec.dirs = 2;
  else if (dir != "forward")
    return std::nullopt;
  spec.layout = node.attr_int("layout", 0);
  spec.hidden = node.attr_int("hidden_size", 0);
  spec.linear_before_reset = cell == Cell::Gru && node.attr_int("linear_before_reset", 0) != 0;
  auto relu =
      rnn_relu_per_direction(node, op_name(cell));  // also refuses clip, input_forget, bad layouts
  if (!relu) return std::nullopt;
  spec.relu = *relu;
  return spec;
}

void unpack_gradients(const Spec& spec, const Sizes& s, int64_t d, const PackedWeights& g,
                      float* dw, float* dr, float* db, float* dp) {
  const int64_t G = spec.gates(), H = s.hidden, GH = G * H;
  // ONNX [gate(gi) * H + j][k] <- ldigo [k][gi][j], as pack_weights' inverse.
  auto unpack = [&](const std::vector<float>& src, int64_t k_size, float* dst) {
    if (!dst) return;
    float* dd = dst + d * GH * k_size;
    for (int64_t k = 0; k < k_size; ++k)
      for (int64_t gi = 0; gi < G; ++gi) {
        float* row = dd + onnx_gate(spec.cell, gi) * H * k_size + k;
        const float* in = src.data() + (k * G + gi) * H;
        for (int64_t j = 0; j < H; ++j) row[j * k_size] = in[j];
      }
  };
  unpack(g.wl, s.in, dw);
  unpack(g.wi, H, dr);
  if (db) {
    float* wb = db + d * 2 * GH;
    float* rb = wb + GH;
    for (int64_t gi = 0; gi < G; ++gi) {
      const int64_t og = onnx_gate(spec.cell, gi) * H;
      const bool apart = spec.cell == Cell::Gru && spec.linear_before_reset && gi == 2;
      for (int64_t j = 0; j < H; ++j) {
        wb[og + j] = g.bias[static_cast<size_t>(gi * H + j)];
        rb[og + j] = g.bias[static_cast<size_t>((apart ? 3 : gi) * H + j)];
      }
    }
  }
  if (dp)
    for (int64_t gi = 0; gi < 3; ++gi)
      std::copy_n(g.peephole.data() + gi * H, H, dp + d * 3 * H + kPeephole[gi] * H);
}

int64_t onnx_gate(Cell cell, int64_t g) {
  static constexpr int64_t kLstm[4] = {0, 2, 3, 1};  // oneDNN i f c o <- ONNX i o f c
  return cell == Cell::Lstm ? kLstm[g] : g;
}

std::shared_ptr<const DirPrimitives> make_primitives(const Spec& spec, const Sizes& s, int64_t d,
                                                     bool peephole, bool training) {
  auto p = std::make_shared<DirPrimitives>();
  // Backward wants weights in its own layouts: let both primitives choose (any).
  const Descs x = descs(spec, s, peephole, true);
  const Descs user = descs(spec, s, peephole, false);
  p->src_layer = x.src_layer, p->src_iter = x.src_iter, p->src_iter_c = x.src_iter_c;
  p->wl_user = user.wl, p->wi_user = user.wi, p->peephole = x.peephole, p->bias = x.bias;
  p->dst_layer = x.dst_layer, p->dst_iter = x.dst_iter, p->dst_iter_c = x.dst_iter_c;
  const auto prop =
      training ? dnnl::prop_kind::forward_training : dnnl::prop_kind::forward_inference;
  const auto bwd_prop = dnnl::prop_kind::backward;
  const auto dir = spec.right_to_left(d) ? dnnl::rnn_direction::unidirectional_right2left
                                         : dnnl::rnn_direction::unidirectional_left2right;
  // The diff descriptors: plain data, any weights.
  const Descs g = descs(spec, s, peephole, true);
  switch (spec.cell) {
    case Cell::Lstm:
      build<dnnl::lstm_forward, dnnl::lstm_backward>(
          *p, training,
          [&] {
            return dnnl::lstm_forward::desc(prop, dir, x.src_layer, x.src_iter, x.src_iter_c, x.wl,
                                            x.wi, x.peephole, x.bias, x.dst_layer, x.dst_iter,
                                            x.dst_iter_c);
          },
          [&] {
            return dnnl::lstm_backward::desc(bwd_prop, dir, x.src_layer, x.src_iter, x.src_iter_c,
                                             x.wl, x.wi, x.peephole, x.bias, x.dst_layer,
                                             x.dst_iter, x.dst_iter_c, g.src_layer, g.src_iter,
                                             g.src_iter_c, g.wl, g.wi, g.peephole, g.bias,
                                             g.dst_layer, g.dst_iter, g.dst_iter_c);
          });
      break;
    case Cell::Gru:
      if (spec.linear_before_reset) {
        build<dnnl::lbr_gru_forward, dnnl::lbr_gru_backward>(
            *p, training,
            [&] {
              return dnnl::lbr_gru_forward::desc(prop, dir, x.src_layer, x.src_iter, x.wl, x.wi,
                                                 x.bias, x.dst_layer, x.dst_iter);
            },
            [&] {
              return dnnl::lbr_gru_backward::desc(
                  bwd_prop, dir, x.src_layer, x.src_iter, x.wl, x.wi, x.bias, x.dst_layer,
                  x.dst_iter, g.src_layer, g.src_iter, g.wl, g.wi, g.bias, g.dst_layer, g.dst_iter);
            });
      } else {
        build<dnnl::gru_forward, dnnl::gru_backward>(
            *p, training,
            [&] {
              return dnnl::gru_forward::desc(prop, dir, x.src_layer, x.src_iter, x.wl, x.wi, x.bias,
                                             x.dst_layer, x.dst_iter);
            },
            [&] {
              return dnnl::gru_backward::desc(
                  bwd_prop, dir, x.src_layer, x.src_iter, x.wl, x.wi, x.bias, x.dst_layer,
                  x.dst_iter, g.src_layer, g.src_iter, g.wl, g.wi, g.bias, g.dst_layer, g.dst_iter);
            });
      }
      break;
    case Cell::Rnn: {
      const dnnl::algorithm act = activation(spec.relu[static_cast<size_t>(d)]);
      build<dnnl::vanilla_rnn_forward, dnnl::vanilla_rnn_backward>(
          *p, training,
          [&] {
            return dnnl::vanilla_rnn_forward::desc(prop, act, dir, x.src_layer, x.src_iter, x.wl,
                                                   x.wi, x.bias, x.dst_layer, x.dst_iter);
          },
          [&] {
            return dnnl::vanilla_rnn_backward::desc(
                bwd_prop, act, dir, x.src_layer, x.src_iter, x.wl, x.wi, x.bias, x.dst_layer,
                x.dst_iter, g.src_layer, g.src_iter, g.wl, g.wi, g.bias, g.dst_layer, g.dst_iter);
          });
      break;
    }
  }
  return p;
}

std::optional<Operands> read_operands(const KernelContext& ctx, const Spec& spec) {
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(1);
  if (x.rank() != 3 || w.rank() != 3 || x.numel() == 0) return std::nullopt;
  Operands o;
  o.x = &x;
  o.s.seq = spec.layout == 0 ? x.dim(0) : x.dim(1);
  o.s.batch = spec.layout == 0 ? x.dim(1) : x.dim(0);
  o.s.in = x.dim(2);
  const int64_t G = spec.gates();
  o.s.hidden = spec.hidden > 0 ? spec.hidden : w.dim(1) / G;
  const int64_t H = o.s.hidden, dirs = spec.dirs;
  if (H <= 0) return std::nullopt;
  const Shape state = state_shape(spec, o.s);
  // Each present input must be float32 of its shape.
  bool ok = true;
  auto take = [&](size_t i, const Shape& want) -> const float* {
    const Tensor* t = ctx.optional_input(i);
    if (!t) return nullptr;
    if (t->shape() != want || t->dtype() != DType::Float32) ok = false;
    return ok ? t->data<float>() : nullptr;
  };
  o.w = take(1, {dirs, G * H, o.s.in});
  o.r = take(2, {dirs, G * H, H});
  o.b = take(3, {dirs, 2 * G * H});
  o.h0 = take(5, state);
  if (spec.cell == Cell::Lstm) {
    o.c0 = take(6, state);
    o.p = take(7, {dirs, 3 * H});
  }
  if (!ok) return std::nullopt;
  if (const Tensor* lens = ctx.optional_input(4)) {
    if (lens->shape() != Shape{o.s.batch}) return std::nullopt;
    for (int64_t l : read_int_list(ctx, *lens, "sequence_lens"))
      if (l != o.s.seq) return std::nullopt;  // shorter sequences: the reference
  }
  return o;
}

Shape y_shape(const Spec& spec, const Sizes& s) {
  return spec.layout == 0 ? Shape{s.seq, spec.dirs, s.batch, s.hidden}
                          : Shape{s.batch, s.seq, spec.dirs, s.hidden};
}

Shape state_shape(const Spec& spec, const Sizes& s) {
  return spec.layout == 0 ? Shape{spec.dirs, s.batch, s.hidden}
                          : Shape{s.batch, spec.dirs, s.hidden};
}

void sequence_rows(const Spec& spec, const Sizes& s, int64_t dirs, int64_t d, int64_t width,
                   float* value, std::vector<float>& rows, bool gather) {
  const int64_t T = s.seq, N = s.batch;
  if (gather) rows.assign(static_cast<size_t>(T * N * width), 0.f);
  if (!value) return;
  for (int64_t t = 0; t < T; ++t)
    for (int64_t n = 0; n < N; ++n) {
      float* v =
          value + (spec.layout == 0 ? (t * dirs + d) * N + n : (n * T + t) * dirs + d) * width;
      float* r = rows.data() + (t * N + n) * width;
      std::copy_n(gather ? v : r, width, gather ? r : v);
    }
}

void state_rows(const Spec& spec, const Sizes& s, int64_t d, float* state, std::vector<float>& rows,
                bool gather) {
  const int64_t H = s.hidden;
  if (gather) rows.assign(static_cast<size_t>(s.batch * H), 0.f);
  if (!state) return;
  for (int64_t n = 0; n < s.batch; ++n) {
    float* v = state + (spec.layout == 0 ? d * s.batch + n : n * spec.dirs + d) * H;
    float* r = rows.data() + n * H;
    std::copy_n(gather ? v : r, H, gather ? r : v);
  }
}

void pack_weights(const Spec& spec, const Sizes& s, int64_t d, const float* w, const float* r,
                  const float* b, const float* p, PackedWeights& out) {
  const int64_t G = spec.gates(), H = s.hidden, GH = G * H;
  // ldigo [k][g][j] <- ONNX [gate(g) * H + j][k], for W (k < in) and R (k < H).
  auto pack = [&](const float* src, int64_t k_size, std::vector<float>& dst) {
    dst.resize(static_cast<size_t>(k_size * GH));
    const float* sd = src + d * GH * k_size;
    for (int64_t k = 0; k < k_size; ++k)
      for (int64_t g = 0; g < G; ++g) {
        const float* row = sd + onnx_gate(spec.cell, g) * H * k_size + k;
        float* o = dst.data() + (k * G + g) * H;
        for (int64_t j = 0; j < H; ++j) o[j] = row[j * k_size];
      }
  };
  pack(w, s.in, out.wl);
  pack(r, H, out.wi);
  out.bias.assign(static_cast<size_t>(spec.bias_gates() * H), 0.f);
  if (b) {
    const float* wb = b + d * 2 * GH;
    const float* rb = wb + GH;
    for (int64_t g = 0; g < G; ++g) {
      const int64_t og = onnx_gate(spec.cell, g) * H;
      // lbr_gru keeps Rb_h apart, as its fourth gate.
      const bool apart = spec.cell == Cell::Gru && spec.linear_before_reset && g == 2;
      for (int64_t j = 0; j < H; ++j) {
        out.bias[static_cast<size_t>(g * H + j)] = wb[og + j] + (apart ? 0.f : rb[og + j]);
        if (apart) out.bias[static_cast<size_t>(3 * H + j)] = rb[og + j];
      }
    }
  }
  out.peephole.clear();
  if (p) {
    out.peephole.resize(static_cast<size_t>(3 * H));
    for (int64_t g = 0; g < 3; ++g)
      std::copy_n(p + d * 3 * H + kPeephole[g] * H, H, out.peephole.data() + g * H);
  }
}

}  // namespace dprun::rnn_onednn
