#pragma once
// Checkpoints of `dprun train`: one ONNX file, OUT.ckpt.onnx beside `--save OUT.onnx`, that
// holds the model in its training form (BatchNormalization and Dropout as exported for
// training) with the parameters and running statistics of the step, and the run's state as
// initializers under "dprun.state.": the optimizer's steps and buffers, the float16 loss
// scaler, the run's step and a checksum of the parameters. One file, replaced by an atomic
// rename, so a kill at any moment leaves the previous checkpoint or the new one, whole.
// `dprun train OUT.ckpt.onnx --resume` continues from it; OUT.onnx, the inference form, is the
// file to serve.
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "engine/autograd/grad_scaler.h"
#include "engine/autograd/optimizer.h"
#include "engine/graph.h"
#include "engine/model.h"

namespace dprun::cli {

/// The checkpoint kept beside the model saved to `save_path`: its name with ".onnx" (if any)
/// replaced by ".ckpt.onnx".
std::string checkpoint_path(const std::string& save_path);

/// Writes the checkpoint of `model` after `step` steps of a run with --seed `seed` to `path`.
/// `scaler` is null outside float16 training.
void save_checkpoint(const std::string& path, const Model& model, const Optimizer& optimizer,
                     const GradScaler* scaler, int64_t step, uint64_t seed);

/// A checkpoint read back: the training-form graph (the state taken out of its initializers)
/// and the state's tensors by name.
struct Checkpoint {
  std::shared_ptr<Graph> graph;
  std::map<std::string, Tensor> state;
};

/// Reads the checkpoint at `path`. Throws Error naming the file when it cannot be read or is
/// not a checkpoint (a model without state, such as the inference form --save writes).
Checkpoint read_checkpoint(const std::string& path);

/// Loads the state of `checkpoint` (read from `path`) into `optimizer` (and `scaler`) and
/// returns the run's step. Throws Error naming the file and what does not fit: parameters
/// other than those the state was saved with, another optimizer's buffers, a float16 state
/// for another precision or the reverse, another --seed than `seed` (it orders the data and
/// draws the Dropout masks).
int64_t restore_training_state(const Checkpoint& checkpoint, const std::string& path,
                               const Model& model, Optimizer& optimizer, GradScaler* scaler,
                               uint64_t seed);

}  // namespace dprun::cli
