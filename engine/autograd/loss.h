#pragma once
// Training losses as ordinary ONNX nodes appended to a forward graph, each the mean over the
// batch as PyTorch's default reduction='mean' computes it.
#include <cstdint>
#include <optional>
#include <string>

#include "engine/graph.h"

namespace dprun {

enum class LossKind {
  CrossEntropy,   // logits + int64 class targets (torch.nn.functional.cross_entropy)
  Nll,            // log-probabilities + int64 class targets (nll_loss)
  Mse,            // mse_loss: mean of squared differences over every element
  L1,             // l1_loss: mean of absolute differences over every element
  BceWithLogits,  // binary_cross_entropy_with_logits with float targets in [0, 1]
  None,           // the model's output already is the loss: 0-d, or one value per sample
};

/// Parses "cross_entropy", "nll", "mse", "l1", "bce_with_logits" or "none"; throws otherwise.
LossKind parse_loss_kind(const std::string& text);
std::string loss_kind_name(LossKind kind);
/// True for the losses that compare the output with a target.
bool loss_needs_target(LossKind kind);

struct LossSpec {
  LossKind kind = LossKind::CrossEntropy;
  /// The model output the loss reads; empty means the graph's first output.
  std::string output;
  /// Cross entropy and NLL: the class dim of the output (1 as in PyTorch; -1 for
  /// [batch, seq, vocab] language-model logits, where the mean runs over every position).
  int64_t class_dim = 1;
  /// Cross entropy and NLL: positions whose target is this class index are left out of the
  /// loss and of the mean's count (PyTorch's ignore_index, -100 by default as there); none when
  /// unset. A batch whose targets are all ignored has the loss 0 and no gradient (PyTorch's
  /// 0/0 is NaN), so a replica or rank whose chunk holds only ignored targets adds nothing.
  std::optional<int64_t> ignore_index = -100;
  /// Cross entropy: PyTorch's label_smoothing in [0, 1]: the loss is (1 - s) times the cross
  /// entropy plus s times the mean over classes of -log_softmax, each averaged over the
  /// positions that are not ignored.
  double label_smoothing = 0;
};

/// What append_loss added.
struct LossNodes {
  std::string loss;              // the 0-d loss value
  std::string target;            // the graph input added for the target; empty for LossKind::None
  DType dtype = DType::Float32;  // the loss's element type
  /// The target value left out of the mean (LossSpec::ignore_index of a class loss), if any.
  std::optional<int64_t> ignored_target;
};

/// Appends the loss nodes (and a `target` graph input when the loss needs one) to `graph`,
/// at the graph's ai.onnx opset. Throws naming the output when it is missing, not floating
/// point, or has an unknown rank where the class dim must be moved; cross entropy and NLL
/// need opset 12 or newer (SoftmaxCrossEntropyLoss, NegativeLogLikelihoodLoss).
LossNodes append_loss(Graph& graph, const LossSpec& spec);

}  // namespace dprun
