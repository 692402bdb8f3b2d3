#pragma once
// The random parameters of the augmentations, drawn as torchvision's transforms draw them
// (their get_params) from one sample's stream (engine/training/sample_random.h), and the
// fixed windows of the evaluation transform.
#include <cstdint>

#include "engine/training/image_ops.h"
#include "engine/training/sample_random.h"

namespace dprun {

/// RandomHorizontalFlip(p=0.5): whether to flip.
bool draw_flip(SampleRandom& random);
/// RandomCrop((height, width), padding=pad): the window of the image padded by `pad` on every
/// side, in the unpadded image's coordinates (top and left in [-pad, pad]).
Box draw_crop(SampleRandom& random, int64_t height, int64_t width, int64_t pad);
/// RandomResizedCrop's window, scale (0.08, 1) and ratio (3/4, 4/3): up to 10 tries of an area
/// and a log-uniform aspect ratio that fit, else the centre crop of the ratio nearest the
/// image's.
Box draw_resized_crop(SampleRandom& random, int64_t height, int64_t width);
/// FFCV's Cutout(size): a size x size square inside the image, its corner uniform.
Box draw_cutout(SampleRandom& random, int64_t height, int64_t width, int64_t size);
/// F.center_crop's window of `size` x `size` (inside the image).
Box center_box(int64_t height, int64_t width, int64_t size);
/// Resize(size)'s output for an image of height x width: the shorter side becomes `size`,
/// the longer keeps the ratio (rounded down). Returns {height, width}.
std::pair<int64_t, int64_t> shorter_side_resized(int64_t height, int64_t width, int64_t size);

}  // namespace dprun
