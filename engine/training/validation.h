#pragma once
// Validation: the model in inference mode (engine/autograd/inference_graph.h) with its loss,
// over a held-out data set, as a PyTorch loop runs model.eval() under torch.no_grad().
#include <memory>
#include <optional>

#include "engine/autograd/loss.h"
#include "engine/model.h"
#include "engine/training/training_data.h"

namespace dprun {

struct ValidationResult {
  double loss = 0;                 // mean over the rows
  std::optional<double> accuracy;  // classification losses (cross_entropy, nll) only
};

class Validation {
 public:
  /// Compiles `model`'s inference graph with `loss` over model's parameters (shared, so each
  /// run() sees their current values) for `data`, whose target the loss takes (undefined for
  /// --loss none). Throws Error when the loss does not fit the model (append_loss).
  Validation(const Model& model, const LossSpec& loss, TrainingData data);
  /// Runs every row of the data set once, in its batches, on the model's device: the loss is
  /// the mean of the batch losses weighted by their rows; the accuracy the share of targets
  /// whose class has the largest score along the loss's class dim.
  ValidationResult run();

 private:
  std::shared_ptr<Model> eval_;
  LossSpec loss_;
  TrainingData data_;
};

}  // namespace dprun
