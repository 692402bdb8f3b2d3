#pragma once
// The files of a training run (engine/training/training_run.h) as `dprun train` writes them:
// the model to serve, OUT.onnx (its inference form: BatchNormalization on its running
// statistics, Dropout as Identity), and the checkpoint to resume from, OUT.ckpt.onnx
// (loader/checkpoint_file.h). Each is replaced whole by an atomic rename.
#include <functional>
#include <string>

#include "engine/training/training_run.h"
#include "loader/onnx_loader.h"

namespace dprun {

class TrainingRunFiles : public TrainingRunWriter {
 public:
  /// Writes to `save_path` and checkpoint_path(save_path), as `options` say (external data past
  /// a size). Removes the temporary files that a save killed before its rename left beside
  /// them: a second run writing the same files at the same time would conflict anyway.
  explicit TrainingRunFiles(std::string save_path, SaveOptions options = {});

  /// The saved model's graph is `edit`'s rewrite of the inference form (embedded
  /// preprocessing, engine/training/preprocessing_graph.h); checkpoints are not rewritten.
  void set_serving_edit(std::function<Graph(const Graph&)> edit) { edit_ = std::move(edit); }

  void save_model(const Model& model, int64_t steps_done) override;
  void save_checkpoint(const CheckpointedRun& run, int64_t steps_done) override;

 private:
  std::string save_path_;
  SaveOptions options_;
  std::function<Graph(const Graph&)> edit_;
};

}  // namespace dprun
