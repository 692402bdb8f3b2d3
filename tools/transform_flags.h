#pragma once
// --layout, --normalize and --augment: how the rows of an input file become the model's
// samples (engine/training/input_transform.h). `dprun train` takes all three; `run` and
// `bench` take the first two, which is what serving a trained model needs.
#include <map>
#include <string>
#include <vector>

#include "engine/model.h"
#include "engine/training/input_transform.h"
#include "engine/training/training_data.h"
#include "tools/command_line.h"

namespace dprun::cli {

struct TransformFlags {
  std::vector<std::string> layouts, normalizes, augments;
};

/// Declares --layout and --normalize, and with `augment` --augment, in the group "input
/// transforms".
void add_transform_options(CLI::App& app, TransformFlags& flags, bool augment);

/// The transforms by input name. Throws UsageError for a value without NAME=, an input given
/// twice to one option, or a value the parsers refuse (parse_layout, parse_normalize,
/// parse_augment).
std::map<std::string, InputTransform> input_transforms(const TransformFlags& flags);

/// Throws UsageError when a transform does not fit the model's declared input: an input the
/// model does not have ("--normalize names 'N', which is not an input of the model"), nhwc or
/// an augmentation for an input whose declared rank is not 4 ("--layout x=nhwc: input 'x' of
/// the model is [batch, 16]; nhwc is for images, [batch, C, H, W]"), or a normalization whose
/// count is not the declared channel count (dim 1).
void check_transforms_fit(const Model& model, const std::map<std::string, InputTransform>& t);

/// Throws Error "input 'x' of the model is [batch, 3, 8, 8], but its transformed samples are
/// [8, 8, 3]" when a transformed input's samples do not have the dims the model declares
/// (after the rows): a channels-last file without --layout NAME=nhwc, most often.
void check_samples_fit(const Model& model, const TrainingData& data,
                       const std::map<std::string, InputTransform>& t);

}  // namespace dprun::cli
