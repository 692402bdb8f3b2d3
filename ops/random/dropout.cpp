// Dropout. In inference (every opset before 12, and 12+ unless training_mode is true) the
// output is the input and the mask is all ones/true. In training mode with ratio > 0 elements
// are zeroed with probability `ratio` and the rest scaled by 1 / (1 - ratio). With a `seed`
// the mask is drawn like numpy's legacy RandomState(seed).uniform(size=x.shape) >= ratio, so it
// matches the ONNX reference outputs; without one it is drawn from the run's stream for the
// node (RunOptions::random_seed: `dprun train --seed`), or from a fresh random seed.
#include <random>

#include "engine/autograd/shape_rules.h"
#include "engine/op_facts.h"
#include "ops/common/data_movement.h"

namespace dprun {
namespace {

/// numpy's random_sample(): a 53-bit double from two 32-bit MT19937 outputs.
double next_double(std::mt19937& gen) {
  const uint32_t a = static_cast<uint32_t>(gen()) >> 5, b = static_cast<uint32_t>(gen()) >> 6;
  return (a * 67108864.0 + b) / 9007199254740992.0;
}

class DropoutKernel : public OpKernel {
 public:
  explicit DropoutKernel(const KernelInfo& info)
      : opset_(info.opset), ratio_attr_(info.node.attr_float("ratio", 0.5f)) {
    if (info.node.has_attr("seed")) {
      has_seed_ = true;
      seed_ = info.node.attr_int("seed");
    }
  }
  // The seed attribute's stream (numpy's), else the run's stream for this node, else fresh
  // entropy.
  std::mt19937 generator(const KernelContext& ctx) const {
    if (has_seed_) return std::mt19937(static_cast<uint32_t>(seed_));
    if (auto seed = ctx.random_seed()) {
      std::seed_seq seq{static_cast<uint32_t>(*seed), static_cast<uint32_t>(*seed >> 32)};
      return std::mt19937(seq);
    }
    return std::mt19937(std::random_device{}());
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    bool training = false;
    double ratio = ratio_attr_;
    if (opset_ >= 12) {
      if (const Tensor* r = ctx.optional_input(1)) {
        if (r->numel() != 1) ctx.fail("ratio must be a scalar, got ", r->describe());
        ratio = r->item_as_double();
      }
      if (const Tensor* t = ctx.optional_input(2)) {
        if (t->numel() != 1) ctx.fail("training_mode must be a scalar, got ", t->describe());
        training = t->item_as_double() != 0.0;
      }
    }
    const bool want_mask = ctx.output_count() > 1 && ctx.output_wanted(1);
    // Masks are bool from opset 10; before that they have the input's type.
    const DType mask_type = opset_ >= 10 ? DType::Bool : x.dtype();
    if (!training || ratio == 0.0) {
      ctx.set_output(0, x);
      if (want_mask) {
        Tensor& m = ctx.allocate_output(1, x.shape(), mask_type);
        visit_dtype(mask_type, [&](auto zero) {
          using T = decltype(zero);
          T one;
          if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>)
            one = T(1.0f);
          else
            one = static_cast<T>(1);
          std::fill(m.data<T>(), m.data<T>() + m.numel(), one);
        });
      }
      return;
    }
    if (!(ratio > 0.0 && ratio < 1.0))
      ctx.fail("ratio must be in [0, 1) in training mode, got ", ratio);
    std::mt19937 gen = generator(ctx);
    std::vector<uint8_t> keep(static_cast<size_t>(x.numel()));
    for (auto& k : keep) k = next_double(gen) >= ratio;
    const double scale = 1.0 / (1.0 - ratio);
    Tensor& y = ctx.allocate_output(0, x.shape(), x.dtype());
    visit_dtype(x.dtype(), [&](auto zero) {
      using T = decltype(zero);
      if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
        const T* in = x.data<T>();
        T* out = y.data<T>();
        for (size_t i = 0; i < keep.size(); ++i)
          out[i] = T(keep[i] ? static_cast<float>(static_cast<float>(in[i]) * scale) : 0.0f);
      } else if constexpr (std::is_floating_point_v<T>) {
        const T* in = x.data<T>();
        T* out = y.data<T>();
        for (size_t i = 0; i < keep.size(); ++i)
          out[i] = keep[i] ? static_cast<T>(in[i] * static_cast<T>(scale)) : T(0);
      } else {
        ctx.fail("training-mode dropout needs a floating-point input, got ", x.describe());
      }
    });
    if (want_mask) {
      Tensor& m = ctx.allocate_output(1, x.shape(), DType::Bool);
      bool* mp = m.data<bool>();
      for (size_t i = 0; i < keep.size(); ++i) mp[i] = keep[i] != 0;
    }
  }

 private:
  int64_t opset_;
  double ratio_attr_;
  bool has_seed_ = false;
  int64_t seed_ = 0;
};

DPRUN_REGISTER_KERNEL({.op_type = "Dropout", .since = 1, .factory = make_kernel<DropoutKernel>});

}  // namespace
}  // namespace dprun

// The ops' facts (engine/op_facts.h): output types, shapes, 16-bit and layout policy.
namespace dprun {
namespace {

// The output and the mask both have the input's shape.
std::optional<SymbolicShape> dropout_shape(const ShapeQuery& q) {
  return q.output <= 1 ? q.input(0) : std::nullopt;
}

DPRUN_REGISTER_OP_FACTS({.op_type = "Dropout",
                         .dtype = OutputDTypeRule::fixed_after_first(DType::Bool),
                         .shape_rule = dropout_shape,
                         .layout = kLayoutUnary,
                         .random = true});

}  // namespace
}  // namespace dprun
