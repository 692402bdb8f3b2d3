#pragma once
// The settings that fix a training run's arithmetic, as a checkpoint keeps them and a resumed
// run compares them (engine/training/checkpoint_state.h).
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "engine/model.h"
#include "engine/training/input_transform.h"
#include "engine/training/optimizer.h"
#include "engine/training/trainer.h"

namespace dprun {

/// One setting that changes the arithmetic of a run: the option and its value as text
/// (numbers in their shortest exact form, so equal values give equal text).
struct RunSetting {
  std::string option;  // as `dprun train` calls it, without "--"
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
/// Trainer, `optimizer` the one made from trainer.parameters() (an Sgd or an Adam; Error for
/// another kind). `batch` is the rows of a batch, `accumulate` the batches of a step,
/// `shuffle` whether the data are reshuffled each epoch.
std::vector<RunSetting> run_settings(const TrainerOptions& options, const Model& model,
                                     const Trainer& trainer, const Optimizer& optimizer,
                                     int64_t batch, int64_t accumulate, bool shuffle);

}  // namespace dprun

namespace dprun {

/// --layout, --normalize and --augment, each over every input (items NAME=VALUE joined by ';'
/// in name order, or "none"): a resumed run must transform its data as the run it continues.
std::vector<RunSetting> transform_settings(const std::map<std::string, InputTransform>& transforms);

}  // namespace dprun
