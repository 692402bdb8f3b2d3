#pragma once
// Checkpoints of `dprun train`: one ONNX file, OUT.ckpt.onnx beside `--save OUT.onnx`, that
// holds the model in its training form (BatchNormalization and Dropout as exported for
// training) with the parameters and running statistics of the step, and the run's state as
// initializers under "dprun.state.": the optimizer's steps and buffers (named by parameter),
// the float16 loss scaler, the run's step and --seed, the settings that fix the run's
// arithmetic ("dprun.state.run.<option>", as text), and a checksum of all of them and of the
// parameters (tools/checkpoint_checksum.h). One file, replaced by an atomic rename, so a kill
// at any moment leaves the previous checkpoint or the new one, whole.
// `dprun train OUT.ckpt.onnx --resume` continues from it; OUT.onnx, the inference form, is the
// file to serve.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/autograd/grad_scaler.h"
#include "engine/autograd/optimizer.h"
#include "engine/autograd/trainer.h"
#include "engine/graph.h"
#include "engine/model.h"

namespace dprun::cli {

/// The checkpoint kept beside the model saved to `save_path`: its name with ".onnx" (if any)
/// replaced by ".ckpt.onnx".
std::string checkpoint_path(const std::string& save_path);

/// One setting that changes the arithmetic of a run: the option and its value as text
/// (numbers in their shortest exact form, so equal values give equal text).
struct RunSetting {
  std::string option;  // without "--"
  std::string value;
  bool flag = false;  // an option without a value: value is "yes" or "no"
};

/// What a resumed run must share with the run that wrote the checkpoint, in the order a
/// mismatch is reported: --precision, --batch, --accumulate, --loss and its options,
/// --optimizer and its hyper-parameters, --clip-grad-norm, --loss-scale-growth-interval,
/// --freeze, --shuffle, --sync-batchnorm. Left out on purpose: the learning rate and its
/// schedule (--lr, --param-lr, --lr-schedule, --lr-warmup...), which a user may change on
/// resume as one sets a PyTorch optimizer's lr after load_state_dict (the lr is not state: each
/// step's comes from the options and the step number); --loss-scale, whose first scale a
/// resumed run replaces by the saved one; the devices and --steps/--epochs, which change
/// where and how long, not what, a step computes.
/// `model` is the forward model (its first output is the loss's default), `trainer` its
/// Trainer, `optimizer` the one made from trainer.parameters().
std::vector<RunSetting> run_settings(const TrainerOptions& options, const Model& model,
                                     const Trainer& trainer, const Optimizer& optimizer,
                                     int64_t batch, int64_t accumulate, bool shuffle);

/// The run a checkpoint is written from or restored into.
struct CheckpointedRun {
  const Model& model;
  const std::vector<std::string>& parameter_names;  // the trained ones, the optimizer's order
  Optimizer& optimizer;
  GradScaler* scaler = nullptr;  // null outside float16 training
  uint64_t seed = 0;
  std::vector<RunSetting> settings;
};

/// Writes the checkpoint of `run` after `step` steps to `path`.
void save_checkpoint(const std::string& path, const CheckpointedRun& run, int64_t step);

/// A checkpoint read back: the training-form graph (the state taken out of its initializers),
/// the state's tensors by name, and the checksum of what was read.
struct Checkpoint {
  std::shared_ptr<Graph> graph;
  std::map<std::string, Tensor> state;
  uint64_t checksum = 0;  // checkpoint_checksum of every initializer read
};

/// Reads the checkpoint at `path`. Throws Error naming the file when it cannot be read or is
/// not a checkpoint (a model without state, such as the inference form --save writes).
Checkpoint read_checkpoint(const std::string& path);

/// Loads the state of `checkpoint` (read from `path`) into `run`'s optimizer (and scaler) and
/// returns the run's step. Nothing is loaded unless every check passes; each failure is one
/// Error naming the file and what does not fit, in this order: a state entry of the wrong kind
/// or one this dprun does not know; a checksum that does not match (a byte changed anywhere:
/// "the checkpoint is damaged"); a setting of `run.settings` other than the saved one ("was
/// trained with --optimizer adam; resume with the same --optimizer (got adamw)"); another
/// --seed; a step below 0 or optimizer steps that do not follow from it; an optimizer buffer
/// for a parameter the run does not train, of another shape or dtype than its parameter, or
/// missing.
int64_t restore_training_state(const Checkpoint& checkpoint, const std::string& path,
                               const CheckpointedRun& run);

/// Removes the temporary files that a save of `path` killed before its rename left beside it
/// (".NAME.XXXXXX", engine/atomic_file.h). A run that writes `path` calls it before its first
/// save: a second run writing the same file at the same time would conflict anyway.
void remove_stale_temporaries(const std::string& path);

}  // namespace dprun::cli
