#include "tools/training_export.h"

#include "loader/onnx_loader.h"

namespace dprun::cli {

void save_training_graph(const Trainer& trainer, const Model& model, const std::string& path,
                         const SaveOptions& options) {
  Graph graph = exportable_training_graph(trainer.training_graph());
  std::map<std::string, Tensor> values;
  for (const auto& name : model.parameter_names()) values[name] = model.parameter(name);
  values[trainer.training_graph().loss_weight] =
      graph.initializers.at(trainer.training_graph().loss_weight);
  save_graph(graph, values, path, options);
}

}  // namespace dprun::cli
