#pragma once
// Validation for `dprun train`: the model in inference mode with its loss, over a data set.
#include <memory>
#include <optional>

#include "engine/autograd/loss.h"
#include "engine/model.h"
#include "tools/train_data.h"

namespace dprun::cli {

struct ValidationResult {
  double loss = 0;                 // mean over the rows
  std::optional<double> accuracy;  // classification losses only
};

class Validation {
 public:
  /// Compiles `model`'s inference graph with `loss` over model's parameters (shared, so it
  /// always sees the current values) and reads the validation files.
  Validation(const Model& model, const LossSpec& loss, const TrainingDataOptions& data);
  /// Runs every row in batches of `batch` on the model's device.
  ValidationResult run(int64_t batch);

 private:
  std::shared_ptr<Model> eval_;
  LossSpec loss_;
  TrainingData data_;
};

}  // namespace dprun::cli
