#include "loader/training_run_files.h"

#include "engine/autograd/inference_graph.h"
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
  if (!edit_) return save_inference_model(model, save_path_, options_);
  const Graph graph = edit_(inference_graph(model.graph()));
  std::map<std::string, Tensor> parameters;  // the model's current values; the edit's own stay
  const std::vector<std::string> names = model.parameter_names();
  for (size_t i = 0; i < names.size(); ++i)
    if (graph.initializers.count(names[i])) parameters[names[i]] = model.parameters()[i];
  save_graph(graph, parameters, save_path_, options_);
}

void TrainingRunFiles::save_checkpoint(const CheckpointedRun& run, int64_t steps_done) {
  dprun::save_checkpoint(checkpoint_path(save_path_), run, steps_done, options_);
}

}  // namespace dprun
