#pragma once
// The backward pass of one RNN, GRU or LSTM node, as ops/recurrent/rnn_grad.cpp unrolls it into
// ONNX nodes (hundreds per node: every time step's gates, recomputed, then walked backwards),
// replaced by one node of the rewrite domain whose CPU kernel runs oneDNN's training forward and
// backward primitives (ops/recurrent/rnn_grad_onednn.cpp).
//
// How the region is found. Finding the unrolled steps by pattern would mean matching the whole
// recurrence; instead the rule marks what it emits, in plain ONNX that any engine runs:
// - every node it emits is named <prefix><forward node's name>/<op type>_<counter>, the
//   counter rising in emission order (GradientContext::emit);
// - its first nodes are one Identity per output gradient it receives (Y, Y_h, Y_c, in that
//   order, each present one), and every node of the region reads those Identities, never the
//   gradients themselves;
// - its last nodes are one Identity per input gradient it gives (X, W, R, B, initial_h,
//   initial_c, P, in input order, each given one), then a Constant, the region's table:
//   int64 [kRnnGradMagic, kRnnGradVersion, 3 flags "gradient of output k received", 8 flags
//   "gradient of input k given"]. Nothing reads it.
// The rewrite accepts a region only when all of this holds and the region is closed: its nodes
// read only the forward node's inputs, the received gradients and each other's results, and
// nothing outside it reads a value of it but the given gradients. It then computes what the
// forward node's attributes and inputs determine, which is what the fused node computes.
#include <cstdint>
#include <optional>
#include <vector>

#include "engine/rewrites/fusion_matcher.h"

namespace dprun {

/// The first two entries of the region's table.
inline constexpr int64_t kRnnGradMagic = 0x524e4e47524144;  // "RNNGRAD"
inline constexpr int64_t kRnnGradVersion = 1;

/// The fused node's op type for a forward op (LSTM -> LSTMGrad, GRU -> GRUGrad, RNN ->
/// RNNGrad). Inputs: the forward node's 8 inputs (absent ones empty; LSTM's 8, GRU's and RNN's
/// 6 then two empty) then the gradients of Y, Y_h and Y_c (empty when not received); outputs:
/// the gradients of the 8 inputs, empty where not given. Attributes: the forward node's.
std::string rnn_grad_op(const std::string& forward_op);

/// Per direction, whether a node with the attributes of an `op` node (RNN, GRU or LSTM; the
/// fused node's are its forward node's) runs on the oneDNN kernels: false for the default
/// activations, true for RNN's Relu. nullopt when it cannot: other activations, clip,
/// input_forget, or a direction or layout the op does not have.
std::optional<std::vector<bool>> rnn_relu_per_direction(const Node& node, const std::string& op);

/// The region of the RNN, GRU or LSTM node `i` as one fused node (see above), when it is found
/// and verified, and X's element type is known to be float32.
std::optional<Fusion> match_rnn_grad(const Matcher& m, size_t i);

}  // namespace dprun
