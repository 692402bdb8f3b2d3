#pragma once
// Pad's arguments, shared by the CPU and CUDA kernels. Opsets: 1 (`paddings`, `value`
// attributes), 2 (`pads`, `value` attributes), 11 (pads and constant_value as inputs), 18
// (optional axes input), 19 (wrap mode). Negative pads crop.
#include <string>
#include <vector>

#include "ops/common/data_movement.h"
#include "ops/math/pad_index.h"

namespace dprun {

using math::PadMode;

/// What a Pad of one input does: the output shape, the leading pad of every dimension, and
/// the fill value's bits in the input's dtype.
struct PadLayout {
  Shape out_shape;
  std::vector<int64_t> begin;  // per dimension; the output coordinate o reads o - begin
  Tensor fill;                 // one element of the input's dtype, on the host
};

class PadParams {
 public:
  explicit PadParams(const KernelInfo& info) : from_attr_(info.opset < 11), read_(info) {
    const Node& n = info.node;
    const std::string mode = n.attr_string("mode", "constant");
    if (mode == "constant")
      mode_ = PadMode::Constant;
    else if (mode == "reflect")
      mode_ = PadMode::Reflect;
    else if (mode == "edge")
      mode_ = PadMode::Edge;
    else if (mode == "wrap")
      mode_ = PadMode::Wrap;
    else
      n.fail("unknown mode '", mode, "' (expected constant, reflect, edge or wrap)");
    if (from_attr_) {
      pads_ = n.has_attr("pads") ? n.attr_ints("pads") : n.attr_ints("paddings");
      value_ = n.attr_float("value", 0.0f);
    }
  }

  PadMode mode() const { return mode_; }

  /// The layout of padding `x` (its shape and dtype). Pads, axes and constant_value inputs are
  /// read on the host: from the plan's copy when they are constants, else copied from the
  /// device (which waits for the work producing them). Fails naming the node when pads do not
  /// fit the axes, an axis is out of range or repeated, a crop goes below zero, or a mode other
  /// than constant pads an empty dimension.
  PadLayout layout(const KernelContext& ctx, const Tensor& x) const {
    const int64_t r = x.rank();
    const Shape& in = x.shape();
    std::vector<int64_t> pads = pads_;
    std::vector<int64_t> axes;
    double value = value_;
    const Tensor* value_t = nullptr;
    Tensor value_host;
    if (!from_attr_) {
      pads = read_int64_values(read_.tensor(ctx, 1), ctx, "pads");
      if (ctx.optional_input(2)) {
        const Tensor& v = read_.tensor(ctx, 2);
        if (v.numel() != 1) ctx.fail("constant_value must hold one value, got ", v.describe());
        value_host = v.device().type == DeviceType::CPU ? v : v.to(Device::cpu());
        value_t = &value_host;
      }
      axes = read_.values(ctx, 3, "axes");
    }
    if (axes.empty())
      for (int64_t d = 0; d < r; ++d) axes.push_back(d);
    if (pads.size() != 2 * axes.size())
      ctx.fail("pads has ", pads.size(), " entries, expected ", 2 * axes.size(), " for input ",
               shape_to_string(in));
    PadLayout out{Shape(static_cast<size_t>(r)), std::vector<int64_t>(static_cast<size_t>(r), 0),
                  Tensor::empty({}, x.dtype())};
    std::vector<int64_t> end(static_cast<size_t>(r), 0);
    std::vector<bool> seen(static_cast<size_t>(r), false);
    for (size_t i = 0; i < axes.size(); ++i) {
      const int64_t a = axes[i] < 0 ? axes[i] + r : axes[i];
      if (a < 0 || a >= r) ctx.fail("axis ", axes[i], " is out of range for rank ", r);
      if (seen[static_cast<size_t>(a)]) ctx.fail("axis ", axes[i], " is repeated in axes");
      seen[static_cast<size_t>(a)] = true;
      out.begin[static_cast<size_t>(a)] = pads[i];
      end[static_cast<size_t>(a)] = pads[i + axes.size()];
    }
    for (size_t d = 0; d < static_cast<size_t>(r); ++d) {
      out.out_shape[d] = in[d] + out.begin[d] + end[d];
      if (out.out_shape[d] < 0)
        ctx.fail("pads ", shape_to_string(pads), " crop dimension ", d, " of ", shape_to_string(in),
                 " below zero");
      if (mode_ != PadMode::Constant && in[d] == 0 && out.out_shape[d] > 0)
        ctx.fail("cannot pad an empty dimension ", d, " in this mode");
    }

    if (value_t && value_t->dtype() == x.dtype()) {
      std::memcpy(out.fill.raw_data(), value_t->raw_data(), dtype_size(x.dtype()));
    } else {
      if (value_t) value = value_t->item_as_double();
      visit_dtype(x.dtype(), [&](auto zero) {
        using T = decltype(zero);
        if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>)
          *static_cast<T*>(out.fill.raw_data()) = T(static_cast<float>(value));
        else
          *static_cast<T*>(out.fill.raw_data()) = static_cast<T>(value);
      });
    }
    return out;
  }

 private:
  bool from_attr_;
  PadMode mode_ = PadMode::Constant;
  std::vector<int64_t> pads_;
  double value_ = 0;
  IntInputReader read_;
};

}  // namespace dprun
