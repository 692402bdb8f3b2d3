// Slice: starts/ends/axes attributes before opset 10; from 10 they are inputs, with steps.
// Bounds are clamped as the ONNX spec describes, so out-of-range starts/ends are not errors.
#include <limits>

#include "ops/cpu/data_movement.h"

namespace dprun {
namespace {

class SliceKernel : public OpKernel {
 public:
  explicit SliceKernel(const KernelInfo& info) : from_attr_(info.opset < 10) {
    if (from_attr_) {
      starts_ = info.node.attr_ints("starts");
      ends_ = info.node.attr_ints("ends");
      if (info.node.has_attr("axes")) axes_ = info.node.attr_ints("axes");
    }
  }
  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    std::vector<int64_t> starts = starts_, ends = ends_, axes = axes_, steps;
    if (!from_attr_) {
      starts = read_int64_values(ctx.input(1), ctx, "starts");
      ends = read_int64_values(ctx.input(2), ctx, "ends");
      axes.clear();
      if (ctx.has_input(3)) axes = read_int64_values(ctx.input(3), ctx, "axes");
      if (ctx.has_input(4)) steps = read_int64_values(ctx.input(4), ctx, "steps");
    }
    const int64_t r = x.rank();
    if (starts.size() != ends.size())
      ctx.fail("starts has ", starts.size(), " entries but ends has ", ends.size());
    if (axes.empty())
      for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
    if (steps.empty()) steps.assign(starts.size(), 1);
    if (axes.size() != starts.size() || steps.size() != starts.size())
      ctx.fail("starts, ends, axes and steps must have the same length, got ", starts.size(), ", ",
               ends.size(), ", ", axes.size(), ", ", steps.size());

    const Shape& in = x.shape();
    const std::vector<int64_t> in_strides = contiguous_strides(in);
    Shape out_shape = in;
    std::vector<int64_t> strides = in_strides;
    std::vector<bool> seen(static_cast<size_t>(r), false);
    int64_t offset = 0;
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
      out_shape[static_cast<size_t>(a)] = len;
      strides[static_cast<size_t>(a)] = in_strides[static_cast<size_t>(a)] * step;
      if (len > 0) offset += start * in_strides[static_cast<size_t>(a)];
    }
    Tensor& y = ctx.allocate_output(0, out_shape, x.dtype());
    strided_copy(ctx.execution(), x.raw_data(), offset, out_shape, strides, y.raw_data(),
                 dtype_size(x.dtype()));
  }

 private:
  bool from_attr_;
  std::vector<int64_t> starts_, ends_, axes_;
};

DPRUN_REGISTER_KERNEL({.op_type = "Slice", .since = 1, .factory = make_kernel<SliceKernel>});

}  // namespace
}  // namespace dprun
