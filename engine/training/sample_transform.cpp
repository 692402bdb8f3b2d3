#include "engine/training/sample_transform.h"

#include <algorithm>

#include "engine/training/augment_draws.h"
#include "engine/training/image_ops.h"

namespace dprun {

namespace {

void augment(Image& image, const Augmentation& a, SampleRandom& random) {
  switch (a.kind) {
    case AugmentKind::HorizontalFlip:
      if (draw_flip(random)) flip_horizontally(image);
      return;
    case AugmentKind::Crop:
      image = crop(image, draw_crop(random, image.height, image.width, a.size));
      return;
    case AugmentKind::ResizedCrop:
      image = resize_bilinear(crop(image, draw_resized_crop(random, image.height, image.width)),
                              a.size, a.size);
      return;
    case AugmentKind::Cutout:
      erase(image, draw_cutout(random, image.height, image.width, a.size));
      return;
  }
}

// Validation: only resized-crop changes the image, to torchvision's evaluation transform.
void evaluate(Image& image, const Augmentation& a) {
  if (a.kind != AugmentKind::ResizedCrop) return;
  const auto [h, w] = shorter_side_resized(image.height, image.width, evaluation_resize(a.size));
  if (h != image.height || w != image.width) image = resize_bilinear(image, h, w);
  image = crop(image, center_box(image.height, image.width, a.size));
}

}  // namespace

void transform_sample(const InputTransform& transform, const void* row, DType dtype,
                      const Shape& stored, const SampleKey& key, float* out) {
  Image image = image_from_row(row, dtype, stored, transform.channels_last);
  if (!transform.augment.empty()) {
    SampleRandom random(key.seed, key.epoch, key.index);
    for (const Augmentation& a : transform.augment)
      key.evaluation ? evaluate(image, a) : augment(image, a, random);
  }
  if (!transform.mean.empty()) normalize(image, transform.mean, transform.std);
  std::copy(image.data.begin(), image.data.end(), out);
}

Tensor transform_all_rows(const std::string& name, const InputTransform& transform,
                          const Tensor& stored) {
  DPRUN_CHECK(stored.rank() >= 1, "input '", name, "' is a 0-d tensor; transforms take rows");
  const Shape row(stored.shape().begin() + 1, stored.shape().end());
  Shape shape = transformed_sample_shape(name, transform, row, stored.dtype());
  const auto sample = static_cast<size_t>(shape_numel(shape));
  shape.insert(shape.begin(), stored.dim(0));
  Tensor out = Tensor::empty(std::move(shape), DType::Float32);
  const size_t row_bytes = static_cast<size_t>(shape_numel(row)) * dtype_size(stored.dtype());
  const char* src = static_cast<const char*>(stored.raw_data());
  for (int64_t k = 0; k < stored.dim(0); ++k)
    transform_sample(transform, src + static_cast<size_t>(k) * row_bytes, stored.dtype(), row,
                     {.index = k, .evaluation = true}, out.data<float>() + k * sample);
  return out;
}

}  // namespace dprun
