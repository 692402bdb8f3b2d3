#pragma once
// Arguments of the ops that read only their input's metadata (Shape) or build a tensor from a
// shape (ConstantOfShape), shared by the CPU and CUDA kernels.
#include "ops/common/data_movement.h"

namespace dprun {

// Shape-15 adds start/end (clamped to [0, rank], negatives count from the end).
class ShapeParams {
 public:
  explicit ShapeParams(const KernelInfo& info)
      : start_(info.node.attr_int("start", 0)),
        end_(info.node.has_attr("end") ? info.node.attr_int("end") : INT64_MAX) {}

  /// The dims of `shape` that the output lists.
  std::vector<int64_t> listed(const Shape& shape) const {
    const auto rank = static_cast<int64_t>(shape.size());
    auto clamp = [rank](int64_t v) {
      if (v < 0) v += rank;
      return std::clamp<int64_t>(v, 0, rank);
    };
    const int64_t first = clamp(start_), last = std::max(first, clamp(end_));
    return std::vector<int64_t>(shape.begin() + first, shape.begin() + last);
  }

 private:
  int64_t start_, end_;
};

/// ConstantOfShape: the `value` attribute (one element, float 0 when absent) repeated over
/// the shape given by input 0.
class ConstantOfShapeParams {
 public:
  explicit ConstantOfShapeParams(const KernelInfo& info) : read_(info) {
    if (info.node.has_attr("value")) {
      value_ = info.node.attr_tensor("value");
      if (value_.numel() != 1)
        info.node.fail("value must hold exactly one element, got ", value_.describe());
    } else {
      value_ = Tensor::scalar<float>(0.0f);
    }
  }

  /// The value, a one-element host tensor of the output's dtype.
  const Tensor& value() const { return value_; }
  /// The output shape; fails naming the node unless input 0 is 1-D with no negative entry.
  Shape shape(const KernelContext& ctx) const {
    const Tensor& shape_t = read_.tensor(ctx, 0);
    if (shape_t.rank() != 1) ctx.fail("shape input must be 1-D, got ", shape_t.describe());
    Shape shape = read_int64_values(shape_t, ctx, "shape");
    for (int64_t d : shape)
      if (d < 0) ctx.fail("shape ", shape_to_string(shape), " has a negative dimension");
    return shape;
  }

 private:
  Tensor value_;
  IntInputReader read_;
};

}  // namespace dprun
