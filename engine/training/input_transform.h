#pragma once
// How the stored rows of one model input become the samples the model takes, as torchvision's
// transforms make them: a file in channels-last order (HWC) is transposed to the model's CHW,
// an integer file is divided by its type's maximum (ToTensor's /255 for uint8), the listed
// augmentations run in order, and each channel is normalized ((x - mean) / std, as
// transforms.Normalize). The result is float32; the stored rows keep their type. The options
// are those of `dprun train --layout/--augment/--normalize` (docs/command-line.md), parsed
// here so that the command line, the C++ API and the Python module read them alike.
// engine/training/sample_transform.h applies them to one sample.
#include <cstdint>
#include <string>
#include <vector>

#include "engine/dtype.h"
#include "engine/shape.h"

namespace dprun {

enum class AugmentKind {
  HorizontalFlip,  // "hflip": RandomHorizontalFlip(p=0.5)
  Crop,            // "crop:PAD": RandomCrop(stored size, padding=PAD), zero padding
  ResizedCrop,     // "resized-crop:SIZE": RandomResizedCrop(SIZE), bilinear with antialias
  Cutout,          // "cutout:SIZE": FFCV's Cutout, a SIZE square of zeros inside the image
};

struct Augmentation {
  AugmentKind kind = AugmentKind::HorizontalFlip;
  int64_t size = 0;  // crop: the padding; resized-crop and cutout: the side
};

/// One input's transform. Empty (the default) leaves the rows as they are stored.
struct InputTransform {
  bool channels_last = false;    // the stored rows are HWC (--layout NAME=nhwc)
  std::vector<float> mean, std;  // per channel; both empty: no normalization
  std::vector<Augmentation> augment;
  /// The options as given, for messages and for the checkpoint's comparison on resume:
  /// "nhwc" or "", "MEAN,.../STD,..." or "", "hflip,crop:4" or "".
  std::string layout_text, normalize_text, augment_text;

  bool empty() const { return !channels_last && mean.empty() && augment.empty(); }
};

/// Parses --layout's value: "nhwc" (rows stored HWC) or "nchw" (as the model takes them).
/// Throws Error "--layout NAME=TEXT: the layout is nhwc or nchw".
void parse_layout(const std::string& name, const std::string& text, InputTransform& into);
/// Parses --normalize's value, "MEAN[,MEAN...]/STD[,STD...]". Throws Error
/// "--normalize NAME=TEXT: ..." for a missing '/', an item that is not a finite number, a std
/// that is not positive, or other counts of means and stds.
void parse_normalize(const std::string& name, const std::string& text, InputTransform& into);
/// Parses --augment's value, a comma-separated list of hflip, crop:PAD, resized-crop:SIZE and
/// cutout:SIZE. Throws Error "--augment NAME=TEXT: ..." for an unknown name, a missing or bad
/// number (PAD an integer >= 0, SIZE >= 1), or a number after hflip.
void parse_augment(const std::string& name, const std::string& text, InputTransform& into);

/// The shape of one transformed sample of input `name`, whose stored rows have shape
/// `stored` (the row dim left out) and type `dtype`: CHW, SIZE x SIZE after resized-crop (in
/// training and in validation alike). Throws Error, the first that applies:
/// "--layout NAME=nhwc: input 'NAME' holds rows of shape [..]; nhwc is for images (rows of 3
/// dims, HWC)"; "--augment NAME=...: input 'NAME' holds rows of shape [..]; augmentation is
/// for images (rows of 3 dims, CHW or with --layout NAME=nhwc HWC)"; "--normalize NAME=...: N
/// means and stds for the C channels of input 'NAME'" (the channel dim is the first of a CHW
/// row, the last of an HWC one); "--augment NAME=...: cutout:S is larger than the HxW image";
/// "input 'NAME' holds DTYPE, which cannot be transformed (numbers only)".
Shape transformed_sample_shape(const std::string& name, const InputTransform& transform,
                               const Shape& stored, DType dtype);

/// resized-crop's evaluation transform (torchvision's): resize to SIZE*256/224, then the
/// centre SIZE x SIZE.
int64_t evaluation_resize(int64_t size);

}  // namespace dprun
