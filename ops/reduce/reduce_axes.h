#pragma once
// What the CPU and CUDA kernels of the Reduce* family and of ArgMax/ArgMin share: the
// reductions' names, how a node's attributes and inputs choose the reduced axes, and the
// output's shape. The device kernels then only differ in how they walk the data.
#include <cstdint>
#include <vector>

#include "ops/common/data_movement.h"
#include "ops/common/reduce_common.h"
#include "ops/math/reduce_functors.h"

namespace dprun {

/// The axes of a Reduce* node: the `axes` attribute before opset 13 (ReduceSum) / 18 (the
/// others), where a missing or empty attribute means all axes; the optional second input from
/// then on, where an empty list means all axes unless noop_with_empty_axes is set.
class ReduceAxes {
 public:
  explicit ReduceAxes(const KernelInfo& info) {
    const Node& node = info.node;
    keepdims_ = node.attr_int("keepdims", 1) != 0;
    const int64_t input_since = node.op_type == "ReduceSum" ? 13 : 18;
    axes_from_input_ = info.opset >= input_since;
    if (axes_from_input_) {
      noop_with_empty_axes_ = node.attr_int("noop_with_empty_axes", 0) != 0;
      if (node.has_attr("axes"))
        node.fail("axes is an input from opset ", input_since, ", not an attribute");
    } else if (node.has_attr("axes")) {
      axes_attr_ = node.attr_ints("axes");
    }
  }

  struct Resolved {
    bool noop = false;             // the output is the input itself
    std::vector<bool> reduce_dim;  // per input dim
    Shape out_shape;
  };

  /// The reduced dims of `x` for this run and the output's shape. An axes input is read with
  /// read_int64_values, so it may live in device memory.
  Resolved resolve(const KernelContext& ctx, const Tensor& x) const {
    Resolved r;
    std::vector<int64_t> axes = axes_attr_;
    if (axes_from_input_) {
      if (const Tensor* t = ctx.optional_input(1)) {
        if (t->rank() > 1) ctx.fail("axes must be 1-D, got shape ", shape_to_string(t->shape()));
        if (t->dtype() != DType::Int32 && t->dtype() != DType::Int64)
          ctx.fail("axes must be int32 or int64, got ", dtype_name(t->dtype()));
        axes = read_int64_values(*t, ctx, "axes");
      }
      if (axes.empty() && noop_with_empty_axes_) {
        r.noop = true;
        return r;
      }
    }
    const int64_t rank = x.rank();
    r.reduce_dim.assign(static_cast<size_t>(rank), axes.empty());
    for (int64_t a : normalize_axes(ctx.node(), axes, rank))
      r.reduce_dim[static_cast<size_t>(a)] = true;
    for (int64_t d = 0; d < rank; ++d) {
      if (!r.reduce_dim[static_cast<size_t>(d)])
        r.out_shape.push_back(x.shape()[static_cast<size_t>(d)]);
      else if (keepdims_)
        r.out_shape.push_back(1);
    }
    return r;
  }

 private:
  bool keepdims_ = true;
  bool axes_from_input_ = false;
  bool noop_with_empty_axes_ = false;
  std::vector<int64_t> axes_attr_;
};

/// ArgMax/ArgMin's attributes and the [outer, d, inner] view of an input along `axis`.
class ArgAxis {
 public:
  explicit ArgAxis(const KernelInfo& info)
      : axis_(info.node.attr_int("axis", 0)),
        keepdims_(info.node.attr_int("keepdims", 1) != 0),
        last_(info.node.attr_int("select_last_index", 0) != 0) {}

  /// select_last_index: ties resolve to the last extreme instead of the first.
  bool select_last() const { return last_; }

  struct Dims {
    int64_t outer, d, inner;
    Shape out_shape;
  };

  /// Fails naming the node when `axis` is out of range for `x`.
  Dims dims(const KernelContext& ctx, const Shape& x) const {
    const auto rank = static_cast<int64_t>(x.size());
    if (axis_ < -rank || axis_ >= rank)
      ctx.fail("axis ", axis_, " is out of range for input shape ", shape_to_string(x));
    const int64_t a = axis_ < 0 ? axis_ + rank : axis_;
    Dims dims{dims_product(x, 0, a), x[static_cast<size_t>(a)], dims_product(x, a + 1, rank), x};
    if (keepdims_)
      dims.out_shape[static_cast<size_t>(a)] = 1;
    else
      dims.out_shape.erase(dims.out_shape.begin() + a);
    return dims;
  }

 private:
  int64_t axis_;
  bool keepdims_;
  bool last_;
};

}  // namespace dprun
