#pragma once
// `dprun train --export-training-graph`: the training graph as a standalone ONNX model.
#include <string>

#include "engine/training/trainer.h"
#include "loader/onnx_loader.h"

namespace dprun::cli {

/// Writes trainer's training graph (exportable_training_graph) with model's current
/// parameter values to `path`, atomically.
void save_training_graph(const Trainer& trainer, const Model& model, const std::string& path,
                         const SaveOptions& options);

}  // namespace dprun::cli
