#pragma once
// The deterministic image operations of the training transforms (engine/training/
// input_transform.h), on one float32 CHW image at given parameters: what torchvision's
// functional transforms compute on a float tensor (F.hflip, F.crop with zero padding,
// F.resize(antialias=True), F.normalize) and FFCV's Cutout. Each is a pure function of its
// arguments. The random parameters are drawn by engine/training/augment_draws.h.
#include <cstdint>
#include <vector>

#include "engine/dtype.h"
#include "engine/shape.h"

namespace dprun {

struct Image {
  int64_t channels = 0, height = 0, width = 0;
  std::vector<float> data;  // CHW

  Image() = default;
  Image(int64_t c, int64_t h, int64_t w)
      : channels(c), height(h), width(w), data(static_cast<size_t>(c * h * w), 0.0f) {}
  float* plane(int64_t c) { return data.data() + c * height * width; }
  const float* plane(int64_t c) const { return data.data() + c * height * width; }
};

/// A window of an image: rows top .. top+height-1, columns left .. left+width-1; it may
/// reach outside the image (a crop of the zero-padded image).
struct Box {
  int64_t top = 0, left = 0, height = 0, width = 0;
};

/// What the values of integer type `t` are divided by to become floats in [0, 1] (its maximum,
/// as torchvision's ToTensor divides uint8 by 255). Throws Error for a type that is not an
/// integer type.
float type_maximum(DType t);
/// One stored row as a float CHW image: `stored` is its shape (CHW, or HWC when
/// `channels_last`; any other rank is one channel per first-dim entry, the rest flattened),
/// its values converted to float and, for integers, divided by the type's maximum
/// (torchvision's ToTensor: uint8 / 255).
Image image_from_row(const void* row, DType dtype, const Shape& stored, bool channels_last);
/// F.hflip: mirrors the columns.
void flip_horizontally(Image& image);
/// The window `box` of `image`, zeros where it reaches outside (F.crop after F.pad with 0).
Image crop(const Image& image, const Box& box);
/// F.resize(image, [height, width], bilinear, antialias=True) on a float tensor: the separable
/// triangle filter widened by the scale when shrinking, as PyTorch's interpolate computes it
/// (widths first, then heights; weights in float32, normalized to sum 1).
Image resize_bilinear(const Image& image, int64_t height, int64_t width);
/// Sets the window `box` (inside the image) of every channel to zero.
void erase(Image& image, const Box& box);
/// F.normalize: (x - mean[c]) / std[c] per channel, in float32.
void normalize(Image& image, const std::vector<float>& mean, const std::vector<float>& std);

}  // namespace dprun
