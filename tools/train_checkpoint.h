#pragma once
// The training state `dprun train --checkpoint-every N` writes beside each checkpoint and
// `--resume` continues from: the optimizer steps taken and buffers, the loss scaler's state in
// float16, and the run's step. Stored as an ONNX model (initializers only) named
// CHECKPOINT.onnx.state; the checkpoint model itself holds the parameters and BatchNorm
// statistics, and a checksum of them in the state tells whether the two files are of one step.
#include <cstdint>
#include <string>

#include "engine/autograd/grad_scaler.h"
#include "engine/autograd/optimizer.h"
#include "engine/model.h"

namespace dprun::cli {

/// Where the state of checkpoint `model_path` is kept.
std::string training_state_path(const std::string& model_path);

/// Writes the state after `step` steps of a run of `model` to `path` (atomically: a temporary
/// file renamed). `scaler` is null outside float16 training.
void save_training_state(const std::string& path, const Model& model, const Optimizer& optimizer,
                         const GradScaler* scaler, int64_t step);

/// Loads the state at `path` into `optimizer` (and `scaler`) and returns the run's step.
/// Throws Error naming the file and what does not fit: a missing or unreadable file, a
/// `model` whose parameters are not those the state was saved with, another optimizer's
/// buffers, a float16 state for another precision or the reverse.
int64_t load_training_state(const std::string& path, const Model& model, Optimizer& optimizer,
                            GradScaler* scaler);

}  // namespace dprun::cli
