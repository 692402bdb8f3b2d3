#include "tools/transform_flags.h"

#include <algorithm>

#include "tools/usage_error.h"

namespace dprun::cli {

void add_transform_options(CLI::App& app, TransformFlags& flags, bool augment) {
  const std::string group = "input transforms";
  add_texts(app, "--layout", "NAME=nhwc", flags.layouts,
            "input NAME's file holds channels-last images (N, H, W, C): each batch is "
            "transposed to the model's NCHW; repeatable")
      ->group(group);
  add_texts(app, "--normalize", "NAME=MEAN,../STD,..", flags.normalizes,
            "each channel of input NAME becomes (x - MEAN) / STD, one MEAN and STD per channel; "
            "an integer file (uint8 images) is first divided by its type's maximum (255), as "
            "torchvision's ToTensor; the model gets float32; repeatable")
      ->group(group);
  if (!augment) return;
  add_texts(app, "--augment", "NAME=LIST", flags.augments,
            "augment each training sample of image input NAME, in the list's order, after "
            "--layout and before --normalize, as torchvision: hflip (p 0.5), crop:PAD (random "
            "crop to the stored size after zero padding PAD), resized-crop:SIZE "
            "(RandomResizedCrop(SIZE), bilinear with antialias), cutout:SIZE (FFCV's: a SIZE "
            "square of zeros); each sample's draws come from --seed, the epoch and its row; "
            "--val-input rows are not augmented (resized-crop: resized to SIZE*256/224 and "
            "centre-cropped); repeatable")
      ->group(group);
}

namespace {

using Parser = void (*)(const std::string&, const std::string&, InputTransform&);

void parse_all(const std::vector<std::string>& specs, const char* option, Parser parse,
               std::map<std::string, InputTransform>& into) {
  std::map<std::string, bool> seen;
  for (const std::string& spec : specs) {
    const auto [name, value] = split_assignment(spec, option);
    if (seen[name]) throw UsageError(std::string("--") + option + " '" + name + "' given twice");
    seen[name] = true;
    try {
      parse(name, value, into[name]);
    } catch (const Error& e) {
      throw UsageError(e.what());
    }
  }
}

}  // namespace

std::map<std::string, InputTransform> input_transforms(const TransformFlags& flags) {
  std::map<std::string, InputTransform> transforms;
  parse_all(flags.layouts, "layout", parse_layout, transforms);
  parse_all(flags.normalizes, "normalize", parse_normalize, transforms);
  parse_all(flags.augments, "augment", parse_augment, transforms);
  return transforms;
}

void check_transforms_fit(const Model& model, const std::map<std::string, InputTransform>& t) {
  const std::vector<std::string> names = model.input_names();
  const std::vector<TensorType> types = model.input_types();
  for (const auto& [name, transform] : t) {
    const std::string option = !transform.augment.empty() ? "augment"
                               : !transform.mean.empty()  ? "normalize"
                                                          : "layout";
    const auto it = std::find(names.begin(), names.end(), name);
    if (it == names.end())
      throw UsageError("--" + option + " names '" + name + "', which is not an input of the model");
    const std::optional<SymbolicShape>& shape =
        types[static_cast<size_t>(it - names.begin())].shape;
    if (!shape) continue;
    const std::string declared = shape_to_string(*shape);
    if (transform.channels_last && shape->size() != 4)
      throw UsageError("--layout " + name + "=nhwc: input '" + name + "' of the model is " +
                       declared + "; nhwc is for images, [batch, C, H, W]");
    if (!transform.augment.empty() && shape->size() != 4)
      throw UsageError("--augment " + name + "=" + transform.augment_text + ": input '" + name +
                       "' of the model is " + declared +
                       "; augmentation is for images, [batch, C, H, W]");
    const size_t count = transform.mean.size();
    if (count && shape->size() >= 2 && (*shape)[1].is_known() &&
        (*shape)[1].value != static_cast<int64_t>(count))
      throw UsageError("--normalize " + name + "=" + transform.normalize_text + ": " +
                       std::to_string(count) + " mean" + (count == 1 ? "" : "s") + " and std" +
                       (count == 1 ? "" : "s") + " for the " + std::to_string((*shape)[1].value) +
                       " channel" + ((*shape)[1].value == 1 ? "" : "s") + " of input '" + name +
                       "'");
  }
}

void check_samples_fit(const Model& model, const TrainingData& data,
                       const std::map<std::string, InputTransform>& t) {
  const std::vector<std::string> names = model.input_names();
  const std::vector<TensorType> types = model.input_types();
  for (size_t i = 0; i < names.size(); ++i) {
    const auto it = t.find(names[i]);
    const std::optional<SymbolicShape>& shape = types[i].shape;
    if (it == t.end() || it->second.empty() || !shape || shape->empty()) continue;
    const Shape sample = data.sample_shape(i);
    bool fits = sample.size() + 1 == shape->size();
    for (size_t d = 0; fits && d < sample.size(); ++d)
      fits = !(*shape)[d + 1].is_known() || (*shape)[d + 1].value == sample[d];
    if (!fits)
      fail("input '", names[i], "' of the model is ", shape_to_string(*shape),
           ", but its transformed samples are ", shape_to_string(sample));
  }
}

}  // namespace dprun::cli
