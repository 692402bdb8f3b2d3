#pragma once
// The training graph: a forward graph, its loss and the backward pass, as one ONNX graph.
//
//   inputs:  the model's fed inputs, then `target` when the loss needs one, then `loss_weight`
//            (0-d, the loss's dtype: the share of the batch this run's rows are)
//   outputs: `loss` (the mean loss times loss_weight), then `<param>_grad` for every trainable
//            parameter (the gradient of `loss`)
//
// With loss_weight = rows / batch on each replica, the replicas' losses and gradients sum to
// those of the whole batch, however it is split.
//
// BatchNormalization in training mode writes back PyTorch's running variance, updated with
// the unbiased batch variance (n / (n - 1) times the population variance that the ONNX op
// uses, n the elements per channel of the replica's chunk); the running mean is the op's own.
#include <memory>
#include <string>
#include <vector>

#include "engine/autograd/loss.h"
#include "engine/graph.h"

namespace dprun {

/// What build_training_graph builds the training graph from: the loss, the parameters left
/// untrained, the precision of the passes and SyncBatchNorm. (How the graph is then trained,
/// with which optimizer and schedule, is the Trainer's and the Optimizer's.)
struct TrainingGraphSpec {
  LossSpec loss;
  /// Initializers that are never trained (in addition to BatchNormalization running
  /// statistics and non-floating initializers, which never are).
  std::vector<std::string> freeze;
  /// Float32: train as the model is. BFloat16 or Float16: mixed precision, as PyTorch's
  /// autocast: the forward and backward passes compute in 16 bits (to_half_precision, with the
  /// parameters kept float32 as master weights and cast to 16 bits where read;
  /// BatchNormalization, its statistics and the loss stay float32), so gradients, the
  /// optimizer and the saved model are float32. Float16 needs its loss scaled (the Trainer's
  /// GradScaler): its gradients would otherwise flush to zero below 6e-5.
  DType precision = DType::Float32;
  /// Training-mode BatchNormalization normalizes with the statistics of the whole batch,
  /// summed over the replicas of a DataParallel step (engine/autograd/sync_batch_norm.h),
  /// instead of each replica's own chunk's: PyTorch's SyncBatchNorm.
  bool sync_batch_norm = false;
};

struct TrainingGraph {
  std::shared_ptr<Graph> graph;
  /// Trainable parameters: every floating-point initializer the loss depends on
  /// differentiably, less the frozen ones; gradients follow this order.
  std::vector<std::string> parameters;
  /// The target input's name, or empty when the loss needs none.
  std::string target;
  std::string loss_weight = "loss_weight";
  std::string loss = "loss";
  DType loss_dtype = DType::Float32;
  LossKind loss_kind = LossKind::CrossEntropy;
  /// The target value the loss ignores (cross entropy and NLL with ignore_index): the loss is
  /// a mean over the other target elements, so replicas are weighted by their count of them.
  std::optional<int64_t> ignored_target;
};

/// Builds the training graph. Throws Error naming every node on a path from a parameter to
/// the loss whose op has no gradient rule (all of them at once), a frozen name that is not an
/// initializer, or a model with nothing to train. Dropout nodes get a mask output if they
/// lack one (their gradient needs it).
TrainingGraph build_training_graph(const Graph& forward, const TrainingGraphSpec& spec);

/// The training graph as a standalone model: `loss_weight` gets the initializer 1, so it is
/// an optional input and the graph runs in any ONNX engine with the model's inputs and target.
Graph exportable_training_graph(const TrainingGraph& training);

/// The name of the gradient output of parameter `name`.
std::string gradient_output_name(const std::string& name);

}  // namespace dprun
