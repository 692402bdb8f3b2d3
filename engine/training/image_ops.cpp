#include "engine/training/image_ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "engine/error.h"
#include "engine/half.h"

namespace dprun {

namespace {

// The row's elements as float, divided by `divisor` unless it is 1.
template <class T>
void convert(const void* row, size_t n, float divisor, float* out) {
  const T* values = static_cast<const T*>(row);
  for (size_t k = 0; k < n; ++k)
    out[k] =
        divisor == 1.0f ? static_cast<float>(values[k]) : static_cast<float>(values[k]) / divisor;
}

void convert_any(const void* row, DType dtype, size_t n, float* out) {
  const float d = is_integral(dtype) ? type_maximum(dtype) : 1.0f;
  switch (dtype) {
    case DType::Float32:
      return convert<float>(row, n, d, out);
    case DType::Float64:
      return convert<double>(row, n, d, out);
    case DType::UInt8:
      return convert<uint8_t>(row, n, d, out);
    case DType::Int8:
      return convert<int8_t>(row, n, d, out);
    case DType::UInt16:
      return convert<uint16_t>(row, n, d, out);
    case DType::Int16:
      return convert<int16_t>(row, n, d, out);
    case DType::UInt32:
      return convert<uint32_t>(row, n, d, out);
    case DType::Int32:
      return convert<int32_t>(row, n, d, out);
    case DType::UInt64:
      return convert<uint64_t>(row, n, d, out);
    case DType::Int64:
      return convert<int64_t>(row, n, d, out);
    default:
      fail("a ", dtype_name(dtype), " row cannot be transformed (numbers only)");
  }
}

// The triangle filter's taps for one output position along a dim, as PyTorch computes them
// for interpolate(..., mode='bilinear', antialias=True): every step in float32 where its
// kernel is, so that the weights are that kernel's. Written here rather than with oneDNN's
// resampling primitive: its linear mode keeps two taps whatever the scale, where antialias
// widens the filter by the scale when shrinking (every input pixel under an output pixel
// counts), and torchvision's resized crops shrink most of the time.
struct Taps {
  std::vector<int64_t> first, count;
  std::vector<float> weights;  // `stride` per output position
  int64_t stride = 0;
};

float triangle(float x) {
  if (x < 0.0f) x = -x;
  return x < 1.0f ? 1.0f - x : 0.0f;
}

Taps antialias_taps(int64_t in, int64_t out) {
  const float scale = static_cast<float>(in) / static_cast<float>(out);
  const float support = scale >= 1.0f ? scale : 1.0f;  // the filter widens when shrinking
  const float invscale = scale >= 1.0f ? static_cast<float>(1.0 / scale) : 1.0f;
  Taps t;
  t.stride = static_cast<int64_t>(std::ceil(support)) * 2 + 1;
  t.weights.assign(static_cast<size_t>(out * t.stride), 0.0f);
  for (int64_t i = 0; i < out; ++i) {
    const auto center = static_cast<float>(scale * (static_cast<double>(i) + 0.5));
    const int64_t xmin = std::max<int64_t>(static_cast<int64_t>(center - support + 0.5), 0);
    const int64_t xsize =
        std::min<int64_t>(static_cast<int64_t>(center + support + 0.5), in) - xmin;
    float* w = t.weights.data() + i * t.stride;
    float total = 0.0f;
    for (int64_t j = 0; j < xsize; ++j) {
      const float x = static_cast<float>(j + xmin) - center;
      w[j] = triangle(static_cast<float>((static_cast<double>(x) + 0.5) * invscale));
      total += w[j];
    }
    if (total != 0.0f)
      for (int64_t j = 0; j < xsize; ++j) w[j] /= total;
    t.first.push_back(xmin);
    t.count.push_back(xsize);
  }
  return t;
}

// out[o] = sum_j in[(first[o] + j) * step] * w[o][j], over `lines` lines `line_step` apart.
void filter_dim(const float* in, float* out, const Taps& t, int64_t outputs, int64_t step,
                int64_t lines, int64_t in_line_step, int64_t out_line_step, int64_t out_step) {
  for (int64_t line = 0; line < lines; ++line)
    for (int64_t o = 0; o < outputs; ++o) {
      const float* src = in + line * in_line_step + t.first[static_cast<size_t>(o)] * step;
      const float* w = t.weights.data() + o * t.stride;
      float sum = src[0] * w[0];
      for (int64_t j = 1; j < t.count[static_cast<size_t>(o)]; ++j) sum += src[j * step] * w[j];
      out[line * out_line_step + o * out_step] = sum;
    }
}

}  // namespace

float type_maximum(DType t) {
  switch (t) {
    case DType::UInt8:
      return std::numeric_limits<uint8_t>::max();
    case DType::Int8:
      return std::numeric_limits<int8_t>::max();
    case DType::UInt16:
      return std::numeric_limits<uint16_t>::max();
    case DType::Int16:
      return std::numeric_limits<int16_t>::max();
    case DType::UInt32:
      return static_cast<float>(std::numeric_limits<uint32_t>::max());
    case DType::Int32:
      return static_cast<float>(std::numeric_limits<int32_t>::max());
    case DType::UInt64:
      return static_cast<float>(std::numeric_limits<uint64_t>::max());
    case DType::Int64:
      return static_cast<float>(std::numeric_limits<int64_t>::max());
    default:
      fail(dtype_name(t), " is not an integer type");
  }
}

Image image_from_row(const void* row, DType dtype, const Shape& stored, bool channels_last) {
  const auto n = static_cast<size_t>(shape_numel(stored));
  std::vector<float> values(n);
  convert_any(row, dtype, n, values.data());
  if (channels_last) {  // HWC -> CHW
    Image image(stored[2], stored[0], stored[1]);
    const int64_t hw = image.height * image.width, c = image.channels;
    for (int64_t p = 0; p < hw; ++p)
      for (int64_t k = 0; k < c; ++k)
        image.data[static_cast<size_t>(k * hw + p)] = values[p * c + k];
    return image;
  }
  Image image;
  image.channels = stored.empty() ? 1 : stored[0];
  image.height = stored.size() == 3 ? stored[1] : 1;
  image.width = image.channels == 0 ? 0 : static_cast<int64_t>(n) / image.channels / image.height;
  image.data = std::move(values);
  return image;
}

void flip_horizontally(Image& image) {
  for (int64_t c = 0; c < image.channels; ++c)
    for (int64_t y = 0; y < image.height; ++y) {
      float* line = image.plane(c) + y * image.width;
      std::reverse(line, line + image.width);
    }
}

Image crop(const Image& image, const Box& box) {
  Image out(image.channels, box.height, box.width);
  for (int64_t c = 0; c < image.channels; ++c)
    for (int64_t y = 0; y < box.height; ++y) {
      const int64_t sy = box.top + y;
      if (sy < 0 || sy >= image.height) continue;
      const int64_t from = std::max<int64_t>(0, -box.left);
      const int64_t to = std::min<int64_t>(box.width, image.width - box.left);
      if (from >= to) continue;
      std::memcpy(out.plane(c) + y * box.width + from,
                  image.plane(c) + sy * image.width + box.left + from,
                  static_cast<size_t>(to - from) * sizeof(float));
    }
  return out;
}

Image resize_bilinear(const Image& image, int64_t height, int64_t width) {
  const int64_t c = image.channels, h = image.height, w = image.width;
  // Widths first, then heights, as PyTorch's separable pass order.
  Image wide(c, h, width);
  const Taps across = antialias_taps(w, width);
  filter_dim(image.data.data(), wide.data.data(), across, width, 1, c * h, w, width, 1);
  Image out(c, height, width);
  const Taps down = antialias_taps(h, height);
  for (int64_t k = 0; k < c; ++k)
    filter_dim(wide.plane(k), out.plane(k), down, height, width, width, 1, 1, width);
  return out;
}

void erase(Image& image, const Box& box) {
  for (int64_t c = 0; c < image.channels; ++c)
    for (int64_t y = box.top; y < box.top + box.height; ++y)
      std::fill_n(image.plane(c) + y * image.width + box.left, box.width, 0.0f);
}

void normalize(Image& image, const std::vector<float>& mean, const std::vector<float>& std) {
  const int64_t plane = image.height * image.width;
  for (int64_t c = 0; c < image.channels; ++c) {
    float* p = image.plane(c);
    const float m = mean[static_cast<size_t>(c)], s = std[static_cast<size_t>(c)];
    for (int64_t k = 0; k < plane; ++k) p[k] = (p[k] - m) / s;
  }
}

}  // namespace dprun
