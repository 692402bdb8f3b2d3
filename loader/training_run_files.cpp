#include "loader/training_run_files.h"

#include "loader/checkpoint_file.h"

namespace dprun {

TrainingRunFiles::TrainingRunFiles(std::string save_path, SaveOptions options)
    : save_path_(std::move(save_path)), options_(options) {
  for (const std::string& path : {save_path_, checkpoint_path(save_path_)}) {
    remove_stale_temporaries(path);
    remove_stale_temporaries(external_data_path(path));
  }
}

void TrainingRunFiles::save_model(const Model& model, int64_t) {
  save_inference_model(model, save_path_, options_);
}

void TrainingRunFiles::save_checkpoint(const CheckpointedRun& run, int64_t steps_done) {
  dprun::save_checkpoint(checkpoint_path(save_path_), run, steps_done, options_);
}

}  // namespace dprun
