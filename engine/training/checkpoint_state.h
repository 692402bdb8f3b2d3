#pragma once
// A training run's checkpoint in memory. It is one ONNX graph: the model in its training form
// (BatchNormalization and Dropout as exported for training) with the parameters and running
// statistics of the step, and the run's state as initializers under "dprun.state.": the
// optimizer's steps and buffers (named by parameter), the float16 loss scaler, the run's step
// and seed, the settings that fix the run's arithmetic ("dprun.state.run.<option>", as text,
// engine/training/run_settings.h), and a checksum of all of them and of the parameters
// (engine/training/checkpoint_checksum.h). loader/checkpoint_file.h writes it to a file and
// reads it back; restore_training_state loads it into an Optimizer (and GradScaler).
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/graph.h"
#include "engine/model.h"
#include "engine/training/grad_scaler.h"
#include "engine/training/optimizer.h"
#include "engine/training/run_settings.h"

namespace dprun {

/// The run a checkpoint is made from or restored into.
struct CheckpointedRun {
  const Model& model;
  const std::vector<std::string>& parameter_names;  // the trained ones, the optimizer's order
  Optimizer& optimizer;
  GradScaler* scaler = nullptr;  // null outside float16 training
  uint64_t seed = 0;
  std::vector<RunSetting> settings;  // compared on restore; may be empty
};

/// What a checkpoint file holds: `graph` is the model's graph with the state and checksum
/// added to its initializers, `parameters` the values written in place of the model's
/// parameters (loader/onnx_loader.h's save_graph takes both).
struct CheckpointContents {
  Graph graph;
  std::map<std::string, Tensor> parameters;
};

/// The checkpoint of `run` after `step` steps. Throws Error "the model has an initializer
/// named 'dprun.state.X', which checkpoints keep for themselves" when the model's own names
/// collide with the state's.
CheckpointContents checkpoint_contents(const CheckpointedRun& run, int64_t step);

/// A checkpoint read back: the training-form graph (the state taken out of its initializers),
/// the state's tensors by name (without "dprun.state."), and the checksum of what was read.
struct Checkpoint {
  std::shared_ptr<Graph> graph;
  std::map<std::string, Tensor> state;
  uint64_t checksum = 0;  // checkpoint_checksum of every initializer read
};

/// Takes the state out of `graph`'s initializers. Throws Error "SOURCE: is not a checkpoint
/// (it holds no training state): ..." for a graph without state (such as the inference form).
/// Nothing else is checked here: restore_training_state checks the state.
Checkpoint checkpoint_from_graph(std::shared_ptr<Graph> graph, const std::string& source);

/// Loads the state of `checkpoint` (read from `source`, which messages name) into `run`'s
/// optimizer (and scaler) and returns the run's step. Nothing is loaded unless every check
/// passes; each failure is one Error "SOURCE: ..." saying what does not fit, in this order: a
/// state entry of the wrong kind or one this dprun does not know; a checksum that does not
/// match (a byte changed anywhere: "the checkpoint is damaged"); a setting of `run.settings`
/// other than the saved one ("was trained with --optimizer adam; resume with the same
/// --optimizer (got adamw)"), or missing; another seed; a step below 0 or optimizer steps that
/// do not follow from it (with the scaler's skipped steps), a growth tracker outside the
/// scaler's interval; an optimizer buffer for a parameter the run does not train, of another
/// shape or dtype than its parameter, or missing.
int64_t restore_training_state(const Checkpoint& checkpoint, const std::string& source,
                               const CheckpointedRun& run);

}  // namespace dprun
