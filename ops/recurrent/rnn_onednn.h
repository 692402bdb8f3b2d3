#pragma once
// RNN, GRU and LSTM on oneDNN's recurrent primitives (float32): what the forward kernel
// (rnn_onednn.cpp) shares with anything else that runs those primitives.
//
// ONNX and oneDNN differ in three ways, all handled here:
// - gate order: ONNX LSTM i o f c, oneDNN i f c o; GRU z r h is oneDNN's u r o; peepholes ONNX
//   i o f, oneDNN i f o;
// - weights: ONNX W_d [G*H, in] (rows by gate), oneDNN ldigo [1, 1, in, G, H];
// - biases: ONNX Wb and Rb apart, oneDNN their sum per gate, except the h gate of a GRU with
//   linear_before_reset (lbr_gru), whose Rb_h is a fourth "gate" of the bias (scaled by r).
// Each direction runs as its own unidirectional primitive (left-to-right, or right-to-left for
// reverse and for the second direction of bidirectional), on [seq, batch, .] buffers.
#include <memory>
#include <optional>
#include <vector>

#include "ops/cpu/onednn_util.h"

namespace dprun::rnn_onednn {

enum class Cell { Rnn, Gru, Lstm };

/// The node's attributes, where oneDNN computes what the node asks for.
struct Spec {
  Cell cell = Cell::Lstm;
  int64_t dirs = 1;
  bool reverse = false;  // direction "reverse" (one direction, right to left)
  int64_t layout = 0;
  int64_t hidden = 0;                // 0: from W's shape
  bool linear_before_reset = false;  // GRU
  std::vector<bool> relu;            // per direction, RNN only (else tanh)

  int64_t gates() const { return cell == Cell::Rnn ? 1 : cell == Cell::Gru ? 3 : 4; }
  /// The gates of oneDNN's bias: lbr_gru has Rb_h as a fourth.
  int64_t bias_gates() const { return gates() + (cell == Cell::Gru && linear_before_reset); }
  /// Whether direction d runs right to left.
  bool right_to_left(int64_t d) const { return reverse || d == 1; }

  /// The spec of `node`, or nullopt when oneDNN cannot run it: activations other than the
  /// defaults (Tanh or Relu for RNN), clip, input_forget, an unknown direction or layout.
  static std::optional<Spec> of(const Node& node, Cell cell);
};

/// Sizes of one call.
struct Sizes {
  int64_t seq = 0, batch = 0, in = 0, hidden = 0;
};

/// The inputs of one call, checked (null: absent).
struct Operands {
  Sizes s;
  const Tensor* x = nullptr;
  const float *w = nullptr, *r = nullptr, *b = nullptr, *h0 = nullptr, *c0 = nullptr, *p = nullptr;
};

/// The operands of the node's inputs 0-7 when oneDNN computes this call: float32 inputs of
/// the shapes the node's attributes give, no empty dim, sequence_lens absent or the full length
/// everywhere. nullopt otherwise.
std::optional<Operands> read_operands(const KernelContext& ctx, const Spec& spec);

/// Shapes of the node's values in its layout: Y [seq, dirs, batch, H] (layout 1: [batch, seq,
/// dirs, H]) and the states [dirs, batch, H] ([batch, dirs, H]).
Shape y_shape(const Spec& spec, const Sizes& s);
Shape state_shape(const Spec& spec, const Sizes& s);

/// Direction d's rows of a [seq, dirs, batch, width] value (layout 1: [batch, seq, dirs,
/// width]; X and dX are that with dirs 1), as [seq, batch, width]: `gather` copies them from
/// `value` into `rows`, else from `rows` into `value`. A null value gathers zeros.
void sequence_rows(const Spec& spec, const Sizes& s, int64_t dirs, int64_t d, int64_t width,
                   float* value, std::vector<float>& rows, bool gather);

/// Direction d of a [dirs, batch, H] state (layout 1: [batch, dirs, H]) as [batch, H], the
/// same way.
void state_rows(const Spec& spec, const Sizes& s, int64_t d, float* state, std::vector<float>& rows,
                bool gather);

/// One direction's primitives and the descriptors they were built with. Weights are given to
/// the primitives in the layouts they choose (wl, wi), reordered from ldigo (wl_user, wi_user).
struct DirPrimitives {
  dnnl::memory::desc src_layer, src_iter, src_iter_c, wl_user, wi_user, wl, wi, peephole, bias,
      dst_layer, dst_iter, dst_iter_c;
  dnnl::primitive fwd;
  dnnl::memory::desc fwd_scratchpad, workspace;
  // Built only for training: the backward primitive, its weights' layouts and the diff
  // weights' (diff_wl, diff_wi; ldigo user layouts as wl_user, wi_user).
  dnnl::primitive bwd;
  dnnl::memory::desc bwd_scratchpad, bwd_wl, bwd_wi, diff_wl, diff_wi;
};

/// The primitives of one direction: forward inference, or forward training and backward.
std::shared_ptr<const DirPrimitives> make_primitives(const Spec& spec, const Sizes& s, int64_t d,
                                                     bool peephole, bool training);

/// One direction's operands in oneDNN's layouts and gate order: weights ldigo, bias ldgo
/// [bias_gates, H], peepholes ldgo [3, H] (i f o).
struct PackedWeights {
  std::vector<float> wl, wi, bias, peephole;
};

/// Packs direction d of ONNX W [dirs, G*H, in], R [dirs, G*H, H], B [dirs, 2*G*H] (null:
/// zeros) and P [dirs, 3*H] (null: none).
void pack_weights(const Spec& spec, const Sizes& s, int64_t d, const float* w, const float* r,
                  const float* b, const float* p, PackedWeights& out);

/// Gradients in oneDNN's layouts (PackedWeights) written as direction d's ONNX gradients: dW,
/// dR (each may be null), dB (null: none; Wb and Rb get the same, but for lbr_gru's Rb_h), dP
/// (null: none).
void unpack_gradients(const Spec& spec, const Sizes& s, int64_t d, const PackedWeights& g,
                      float* dw, float* dr, float* db, float* dp);

/// The ONNX gate of oneDNN gate g.
int64_t onnx_gate(Cell cell, int64_t g);

}  // namespace dprun::rnn_onednn
