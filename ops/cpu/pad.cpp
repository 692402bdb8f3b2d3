// Pad: constant, reflect, edge and wrap modes. Each output coordinate maps, per dimension, to
// a source coordinate or to "padding"; negative pads crop.
// Opsets: 1 (`paddings`, `value` attributes), 2 (`pads`, `value` attributes), 11 (pads and
// constant_value as inputs), 18 (optional axes input), 19 (wrap mode).
#include "ops/cpu/data_movement.h"

namespace dprun {
namespace {

enum class PadMode { Constant, Reflect, Edge, Wrap };

class PadKernel : public OpKernel {
 public:
  explicit PadKernel(const KernelInfo& info) : from_attr_(info.opset < 11) {
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

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    const int64_t r = x.rank();
    const Shape& in = x.shape();
    std::vector<int64_t> pads = pads_;
    std::vector<int64_t> axes;
    double value = value_;
    const Tensor* value_t = nullptr;
    if (!from_attr_) {
      pads = read_int64_values(ctx.input(1), ctx, "pads");
      value_t = ctx.optional_input(2);
      if (value_t && value_t->numel() != 1)
        ctx.fail("constant_value must hold one value, got ", value_t->describe());
      if (const Tensor* a = ctx.optional_input(3)) axes = read_int64_values(*a, ctx, "axes");
    }
    if (axes.empty())
      for (int64_t d = 0; d < r; ++d) axes.push_back(d);
    if (pads.size() != 2 * axes.size())
      ctx.fail("pads has ", pads.size(), " entries, expected ", 2 * axes.size(), " for input ",
               shape_to_string(in));
    std::vector<int64_t> begin(static_cast<size_t>(r), 0), end(static_cast<size_t>(r), 0);
    std::vector<bool> seen(static_cast<size_t>(r), false);
    for (size_t i = 0; i < axes.size(); ++i) {
      const int64_t a = axes[i] < 0 ? axes[i] + r : axes[i];
      if (a < 0 || a >= r) ctx.fail("axis ", axes[i], " is out of range for rank ", r);
      if (seen[static_cast<size_t>(a)]) ctx.fail("axis ", axes[i], " is repeated in axes");
      seen[static_cast<size_t>(a)] = true;
      begin[static_cast<size_t>(a)] = pads[i];
      end[static_cast<size_t>(a)] = pads[i + axes.size()];
    }

    // Per dimension: source coordinate of each output coordinate, -1 for padding.
    Shape out_shape(static_cast<size_t>(r));
    std::vector<std::vector<int64_t>> maps(static_cast<size_t>(r));
    for (size_t d = 0; d < static_cast<size_t>(r); ++d) {
      const int64_t n = in[d];
      out_shape[d] = n + begin[d] + end[d];
      if (out_shape[d] < 0)
        ctx.fail("pads ", shape_to_string(pads), " crop dimension ", d, " of ", shape_to_string(in),
                 " below zero");
      auto& map = maps[d];
      map.resize(static_cast<size_t>(out_shape[d]));
      for (int64_t o = 0; o < out_shape[d]; ++o) {
        int64_t i = o - begin[d];
        if (i < 0 || i >= n) {
          if (mode_ != PadMode::Constant && n == 0)
            ctx.fail("cannot pad an empty dimension ", d, " in this mode");
          switch (mode_) {
            case PadMode::Constant:
              i = -1;
              break;
            case PadMode::Edge:
              i = std::clamp<int64_t>(i, 0, n - 1);
              break;
            case PadMode::Wrap:
              i = ((i % n) + n) % n;
              break;
            case PadMode::Reflect: {
              if (n == 1) {
                i = 0;
                break;
              }
              const int64_t period = 2 * (n - 1);
              i = ((i % period) + period) % period;
              if (i >= n) i = period - i;
              break;
            }
          }
        }
        map[static_cast<size_t>(o)] = i;
      }
    }

    Tensor& y = ctx.allocate_output(0, out_shape, x.dtype());
    if (y.numel() == 0) return;
    Tensor fill = Tensor::empty({}, x.dtype());
    if (value_t && value_t->dtype() == x.dtype()) {
      std::memcpy(fill.raw_data(), value_t->raw_data(), dtype_size(x.dtype()));
    } else {
      if (value_t) value = value_t->item_as_double();
      visit_dtype(x.dtype(), [&](auto zero) {
        using T = decltype(zero);
        if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>)
          *static_cast<T*>(fill.raw_data()) = T(static_cast<float>(value));
        else
          *static_cast<T*>(fill.raw_data()) = static_cast<T>(value);
      });
    }

    const std::vector<int64_t> in_strides = contiguous_strides(in);
    const int64_t row = r > 0 ? out_shape.back() : 1;
    const int64_t rows = y.numel() / row;
    const std::vector<int64_t> last_map = r > 0 ? maps.back() : std::vector<int64_t>{0};
    visit_element_size(dtype_size(x.dtype()), [&](auto zero) {
      using U = decltype(zero);
      const U* src = static_cast<const U*>(x.raw_data());
      U* dst = static_cast<U*>(y.raw_data());
      const U pad_value = *static_cast<const U*>(fill.raw_data());
      ctx.parallel_for(rows, std::max<int64_t>(1, 4096 / row), [&](int64_t b, int64_t e) {
        for (int64_t rr = b; rr < e; ++rr) {
          // Source offset of this row's outer coordinates, or -1 when any is padding.
          int64_t rest = rr, off = 0;
          for (int64_t d = r - 2; d >= 0 && off >= 0; --d) {
            const size_t du = static_cast<size_t>(d);
            const int64_t i = maps[du][static_cast<size_t>(rest % out_shape[du])];
            rest /= out_shape[du];
            off = i < 0 ? -1 : off + i * in_strides[du];
          }
          U* o = dst + rr * row;
          if (off < 0) {
            std::fill(o, o + row, pad_value);
            continue;
          }
          for (int64_t k = 0; k < row; ++k) {
            const int64_t i = last_map[static_cast<size_t>(k)];
            o[k] = i < 0 ? pad_value : src[off + i];
          }
        }
      });
    });
  }

 private:
  bool from_attr_;
  PadMode mode_ = PadMode::Constant;
  std::vector<int64_t> pads_;
  double value_ = 0;
};

DPRUN_REGISTER_KERNEL({.op_type = "Pad", .since = 1, .factory = make_kernel<PadKernel>});

}  // namespace
}  // namespace dprun
