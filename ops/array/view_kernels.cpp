// Reshape, Flatten, Squeeze and Unsqueeze (view_kernels.h): new shapes over the same storage
// (no copy), the same kernels on every device.
#include "ops/array/view_kernels.h"

namespace dprun {
namespace {

/// Resolves an ONNX Reshape target: 0 copies the input dim (unless allowzero), -1 is inferred.
Shape resolve_reshape(const Shape& in, const std::vector<int64_t>& target, bool allowzero,
                      const KernelContext& ctx) {
  Shape out(target.size());
  int64_t infer = -1, known = 1;
  bool has_zero = false;
  for (size_t i = 0; i < target.size(); ++i) {
    int64_t v = target[i];
    if (v == -1) {
      if (infer >= 0) ctx.fail("shape ", shape_to_string(target), " has more than one -1");
      infer = static_cast<int64_t>(i);
      continue;
    }
    if (v < -1) ctx.fail("shape ", shape_to_string(target), " has invalid entry ", v);
    if (v == 0 && !allowzero) {
      if (i >= in.size())
        ctx.fail("shape ", shape_to_string(target), " copies dim ", i, " (0) but the input ",
                 shape_to_string(in), " has rank ", in.size());
      v = in[i];
    }
    if (v == 0) has_zero = true;
    out[i] = v;
    known *= v;
  }
  const int64_t numel = shape_numel(in);
  if (infer >= 0) {
    if (allowzero && has_zero)
      ctx.fail("shape ", shape_to_string(target), " combines 0 and -1 with allowzero=1");
    if (known == 0 || numel % known != 0)
      ctx.fail("cannot reshape ", shape_to_string(in), " to ", shape_to_string(target),
               ": the -1 dim cannot be inferred");
    out[static_cast<size_t>(infer)] = numel / known;
  }
  if (shape_numel(out) != numel)
    ctx.fail("cannot reshape ", shape_to_string(in), " (", numel, " elements) to ",
             shape_to_string(target));
  return out;
}

}  // namespace

ReshapeKernel::ReshapeKernel(const KernelInfo& info) : from_attr_(info.opset < 5), read_(info) {
  const Node& n = info.node;
  if (from_attr_) shape_ = n.attr_ints("shape");
  allowzero_ = n.attr_int("allowzero", 0) != 0;
}

void ReshapeKernel::compute(KernelContext& ctx) const {
  const Tensor& x = ctx.input(0);
  std::vector<int64_t> target;
  if (!from_attr_) {
    const Tensor& shape = read_.tensor(ctx, 1);
    if (shape.rank() != 1) ctx.fail("shape input must be 1-D, got ", shape.describe());
    target = read_int64_values(shape, ctx, "shape");
  } else {
    target = shape_;
  }
  ctx.set_output(0, x.reshape(resolve_reshape(x.shape(), target, allowzero_, ctx)));
}

void FlattenKernel::compute(KernelContext& ctx) const {
  const Tensor& x = ctx.input(0);
  const int64_t r = x.rank();
  int64_t axis = axis_ < 0 ? axis_ + r : axis_;
  if (axis < 0 || axis > r) ctx.fail("axis ", axis_, " is out of range for rank ", r);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < r; ++d) (d < axis ? outer : inner) *= x.shape()[static_cast<size_t>(d)];
  ctx.set_output(0, x.reshape({outer, inner}));
}

SqueezeKernel::SqueezeKernel(const KernelInfo& info) : from_attr_(info.opset < 13), read_(info) {
  if (from_attr_ && info.node.has_attr("axes")) {
    axes_ = info.node.attr_ints("axes");
    has_axes_ = true;
  }
}

void SqueezeKernel::compute(KernelContext& ctx) const {
  const Tensor& x = ctx.input(0);
  std::vector<int64_t> axes = axes_;
  bool has_axes = has_axes_;
  if (!from_attr_ && ctx.has_input(1)) {
    axes = read_.values(ctx, 1, "axes");
    has_axes = true;
  }
  const Shape& in = x.shape();
  std::vector<bool> drop(in.size(), false);
  if (!has_axes) {
    for (size_t d = 0; d < in.size(); ++d) drop[d] = in[d] == 1;
  } else {
    for (int64_t a : axes) {
      int64_t d = a < 0 ? a + x.rank() : a;
      if (d < 0 || d >= x.rank()) ctx.fail("axis ", a, " is out of range for rank ", x.rank());
      if (in[static_cast<size_t>(d)] != 1)
        ctx.fail("cannot squeeze axis ", a, " of shape ", shape_to_string(in),
                 ": its size is not 1");
      drop[static_cast<size_t>(d)] = true;
    }
  }
  Shape out;
  for (size_t d = 0; d < in.size(); ++d)
    if (!drop[d]) out.push_back(in[d]);
  ctx.set_output(0, x.reshape(out));
}

UnsqueezeKernel::UnsqueezeKernel(const KernelInfo& info)
    : from_attr_(info.opset < 13), read_(info) {
  if (from_attr_) axes_ = info.node.attr_ints("axes");
}

void UnsqueezeKernel::compute(KernelContext& ctx) const {
  const Tensor& x = ctx.input(0);
  std::vector<int64_t> axes =
      from_attr_ ? axes_ : read_int64_values(read_.tensor(ctx, 1), ctx, "axes");
  const int64_t out_rank = x.rank() + static_cast<int64_t>(axes.size());
  std::vector<bool> inserted(static_cast<size_t>(out_rank), false);
  for (int64_t a : axes) {
    int64_t d = a < 0 ? a + out_rank : a;
    if (d < 0 || d >= out_rank) ctx.fail("axis ", a, " is out of range for output rank ", out_rank);
    if (inserted[static_cast<size_t>(d)]) ctx.fail("axis ", a, " is repeated in axes");
    inserted[static_cast<size_t>(d)] = true;
  }
  Shape out;
  size_t next = 0;
  for (size_t d = 0; d < inserted.size(); ++d) out.push_back(inserted[d] ? 1 : x.shape()[next++]);
  ctx.set_output(0, x.reshape(out));
}

}  // namespace dprun
