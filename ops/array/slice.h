#pragma once
// Slice's arguments and the strided view they select, shared by the CPU and CUDA kernels:
// starts/ends/axes attributes before opset 10; from 10 they are inputs, with steps. Bounds
// are clamped as the ONNX spec describes, so out-of-range starts/ends are not errors.
#include <limits>

#include "ops/common/data_movement.h"

namespace dprun {

class SliceParams {
 public:
  explicit SliceParams(const KernelInfo& info) : from_attr_(info.opset < 10), read_(info) {
    if (from_attr_) {
      starts_ = info.node.attr_ints("starts");
      ends_ = info.node.attr_ints("ends");
      if (info.node.has_attr("axes")) axes_ = info.node.attr_ints("axes");
    }
  }

  /// The elements of a contiguous tensor of shape `in` that the slice selects, as a view
  /// (negative steps give negative strides); fails naming the node on invalid arguments.
  ViewCopy layout(const KernelContext& ctx, const Shape& in) const {
    std::vector<int64_t> starts = starts_, ends = ends_, axes = axes_, steps;
    if (!from_attr_) {
      starts = read_int64_values(read_.tensor(ctx, 1), ctx, "starts");
      ends = read_int64_values(read_.tensor(ctx, 2), ctx, "ends");
      axes = read_.values(ctx, 3, "axes");
      steps = read_.values(ctx, 4, "steps");
    }
    const auto r = static_cast<int64_t>(in.size());
    if (starts.size() != ends.size())
      ctx.fail("starts has ", starts.size(), " entries but ends has ", ends.size());
    if (axes.empty())
      for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
    if (steps.empty()) steps.assign(starts.size(), 1);
    if (axes.size() != starts.size() || steps.size() != starts.size())
      ctx.fail("starts, ends, axes and steps must have the same length, got ", starts.size(), ", ",
               ends.size(), ", ", axes.size(), ", ", steps.size());

    const std::vector<int64_t> in_strides = contiguous_strides(in);
    StridedView v{in, in_strides, 0};
    std::vector<bool> seen(static_cast<size_t>(r), false);
    for (size_t i = 0; i < starts.size(); ++i) {
      int64_t a = axes[i] < 0 ? axes[i] + r : axes[i];
      if (a < 0 || a >= r) ctx.fail("axis ", axes[i], " is out of range for rank ", r);
      if (seen[static_cast<size_t>(a)]) ctx.fail("axis ", axes[i], " is repeated in axes");
      seen[static_cast<size_t>(a)] = true;
      const int64_t dim = in[static_cast<size_t>(a)];
      // INT64_MIN behaves as -INT64_MAX (both take one element), avoiding overflow in -step.
      const int64_t step = std::max(steps[i], -std::numeric_limits<int64_t>::max());
      if (step == 0) ctx.fail("steps must be non-zero (axis ", axes[i], ")");
      int64_t start = starts[i], end = ends[i];
      // Adding dim to a negative value cannot overflow.
      if (start < 0) start += dim;
      if (end < 0) end += dim;
      int64_t len;
      if (dim == 0) {
        len = 0;
      } else if (step > 0) {
        start = std::clamp<int64_t>(start, 0, dim);
        end = std::clamp<int64_t>(end, 0, dim);
        len = end > start ? (end - start - 1) / step + 1 : 0;
      } else {
        start = std::clamp<int64_t>(start, 0, dim - 1);
        end = std::clamp<int64_t>(end, -1, dim - 1);
        len = start > end ? (start - end - 1) / -step + 1 : 0;
      }
      v.shape[static_cast<size_t>(a)] = len;
      v.strides[static_cast<size_t>(a)] = in_strides[static_cast<size_t>(a)] * step;
      if (len > 0) v.offset += start * in_strides[static_cast<size_t>(a)];
    }
    return {v.shape, v};
  }

 private:
  bool from_attr_;
  std::vector<int64_t> starts_, ends_, axes_;
  IntInputReader read_;
};

}  // namespace dprun
