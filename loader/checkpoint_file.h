#pragma once
// Checkpoint files (engine/training/checkpoint_state.h): OUT.ckpt.onnx beside a saved model
// OUT.onnx, one ONNX file that a training run resumes from. Each write replaces the file by an
// atomic rename (engine/atomic_file.h), so a kill at any moment leaves the previous checkpoint
// or the new one, whole, and at most a temporary file beside it.
#include <cstdint>
#include <string>

#include "engine/training/checkpoint_state.h"
#include "loader/onnx_loader.h"

namespace dprun {

/// The checkpoint kept beside the model saved to `save_path`: its name with ".onnx" (if any)
/// replaced by ".ckpt.onnx".
std::string checkpoint_path(const std::string& save_path);

/// Writes the checkpoint of `run` after `step` steps to `path` (checkpoint_contents, then
/// save_graph: a temporary file synced and renamed over `path`). Throws Error naming `path`
/// when the model's initializer names collide with the state's or the file cannot be written;
/// `path` is then left as it was.
void save_checkpoint(const std::string& path, const CheckpointedRun& run, int64_t step,
                     const SaveOptions& options = {});

/// Reads the checkpoint at `path`. Throws Error naming the file when it cannot be read or is
/// not a checkpoint (a model without state, such as the inference form of a saved model).
/// The state is checked when it is restored (restore_training_state).
Checkpoint read_checkpoint(const std::string& path);

/// Removes the temporary files that a save of `path` killed before its rename left beside it
/// (".NAME.XXXXXX", engine/atomic_file.h). A run that writes `path` calls it before its first
/// save: a second run writing the same file at the same time would conflict anyway.
void remove_stale_temporaries(const std::string& path);

}  // namespace dprun
