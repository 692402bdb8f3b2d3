#pragma once
// Concat's and Split's argument checks and output shapes, shared by the CPU and CUDA kernels.
// Both see their tensors as [outer, axis, inner] blocks: Concat appends each input's
// [axis * inner] rows, Split cuts the input's rows into consecutive pieces.
#include "ops/common/data_movement.h"

namespace dprun {

/// Concat's inputs and output shape.
struct ConcatLayout {
  std::vector<const Tensor*> parts;  // the present inputs, in order (empty ones included)
  int64_t axis = 0;                  // normalised
  int64_t outer = 1, inner = 1;
  Shape out_shape;
};

class ConcatParams {
 public:
  // Concat-1 defaults the axis to 1; from opset 4 it is required.
  explicit ConcatParams(const KernelInfo& info)
      : axis_(info.opset < 4 ? info.node.attr_int("axis", 1) : info.node.attr_int("axis")) {}

  /// Checks that the inputs agree in rank, dtype and every dim but the axis; fails naming the
  /// node otherwise.
  ConcatLayout layout(const KernelContext& ctx) const {
    ConcatLayout c;
    for (size_t i = 0; i < ctx.input_count(); ++i)
      if (ctx.has_input(i)) c.parts.push_back(&ctx.input(i));
    if (c.parts.empty()) ctx.fail("needs at least one input");
    const Tensor& first = *c.parts[0];
    const int64_t r = first.rank();
    if (r == 0) ctx.fail("cannot concatenate scalars");
    c.axis = normalize_axis_attr(axis_, r, ctx);
    const auto a = static_cast<size_t>(c.axis);
    c.out_shape = first.shape();
    c.out_shape[a] = 0;
    for (const Tensor* t : c.parts) {
      bool ok = t->rank() == r && t->dtype() == first.dtype();
      for (size_t d = 0; ok && d < static_cast<size_t>(r); ++d)
        ok = d == a || t->shape()[d] == first.shape()[d];
      if (!ok)
        ctx.fail("inputs ", first.describe(), " and ", t->describe(),
                 " cannot be concatenated on axis ", axis_);
      c.out_shape[a] += t->shape()[a];
    }
    std::tie(c.outer, c.inner) = outer_inner(c.out_shape, a);
    return c;
  }

 private:
  int64_t axis_;
};

/// How Split cuts its input: consecutive pieces of `sizes` along `axis`.
struct SplitLayout {
  int64_t axis = 0;  // normalised
  std::vector<int64_t> sizes;
  int64_t outer = 1, inner = 1;
};

// Split: sizes come from the `split` attribute (opset < 13; Split-1 also accepted them as
// input 1), from input 1 (13+), or are equal parts (ceil-sized with num_outputs at 18).
class SplitParams {
 public:
  explicit SplitParams(const KernelInfo& info)
      : opset_(info.opset),
        axis_(info.node.attr_int("axis", 0)),
        num_outputs_(info.node.attr_int("num_outputs", 0)),
        read_(info) {
    if (info.node.has_attr("split")) split_attr_ = info.node.attr_ints("split");
  }

  /// The pieces of `x` for the node's outputs; fails naming the node when they do not add up.
  SplitLayout layout(const KernelContext& ctx, const Shape& x) const {
    const auto r = static_cast<int64_t>(x.size());
    if (r == 0) ctx.fail("cannot split a scalar");
    SplitLayout s;
    s.axis = normalize_axis_attr(axis_, r, ctx);
    const auto a = static_cast<size_t>(s.axis);
    const int64_t dim = x[a];
    const auto n = static_cast<int64_t>(ctx.output_count());
    std::vector<int64_t>& sizes = s.sizes;
    sizes = split_attr_;
    if (sizes.empty()) sizes = read_.values(ctx, 1, "split");
    if (sizes.empty()) {
      if (num_outputs_ > 0 && num_outputs_ != n)
        ctx.fail("num_outputs ", num_outputs_, " does not match the ", n, " outputs");
      if (opset_ >= 18 && num_outputs_ > 0) {
        const int64_t chunk = (dim + n - 1) / n;
        for (int64_t i = 0; i < n; ++i)
          sizes.push_back(std::max<int64_t>(0, std::min(chunk, dim - chunk * i)));
      } else {
        if (dim % n != 0)
          ctx.fail("dimension ", s.axis, " of ", shape_to_string(x),
                   " cannot be split evenly into ", n, " outputs");
        sizes.assign(static_cast<size_t>(n), dim / n);
      }
    }
    if (static_cast<int64_t>(sizes.size()) != n)
      ctx.fail("split has ", sizes.size(), " entries but the node has ", n, " outputs");
    int64_t sum = 0;
    for (int64_t v : sizes) {
      if (v < 0) ctx.fail("split sizes ", shape_to_string(sizes), " contain a negative size");
      sum += v;
    }
    if (sum != dim)
      ctx.fail("split sizes ", shape_to_string(sizes), " sum to ", sum, " but dimension ", s.axis,
               " of ", shape_to_string(x), " has size ", dim);
    std::tie(s.outer, s.inner) = outer_inner(x, a);
    return s;
  }

 private:
  int64_t opset_;
  int64_t axis_;
  int64_t num_outputs_;
  std::vector<int64_t> split_attr_;
  IntInputReader read_;
};

}  // namespace dprun
