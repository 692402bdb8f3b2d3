// RandomUniform, RandomNormal, RandomUniformLike, RandomNormalLike, Bernoulli.
//
// With a `seed` attribute every run draws the same values (a generator seeded from it per
// run, so concurrent runs stay independent and reproducible); without one each run draws
// from a fresh nondeterministic seed.
#include <cstring>
#include <optional>
#include <random>

#include "engine/op_facts.h"
#include "ops/common/reduce_common.h"

namespace dprun {
namespace {

enum class RandomKind { Uniform, Normal, Bernoulli };

// The seed attribute's stream, else the run's stream for the node (RunOptions::random_seed),
// else fresh entropy.
std::mt19937_64 make_engine(const std::optional<float>& seed, const KernelContext& ctx) {
  if (seed) {
    uint32_t bits;
    std::memcpy(&bits, &*seed, sizeof(bits));
    return std::mt19937_64(bits);
  }
  if (auto run_seed = ctx.random_seed()) return std::mt19937_64(*run_seed);
  std::random_device rd;
  return std::mt19937_64((static_cast<uint64_t>(rd()) << 32) ^ rd());
}

/// `Like` selects the variants taking an input tensor whose shape (and default dtype) the
/// output copies.
template <RandomKind K, bool Like>
class RandomKernel : public OpKernel {
 public:
  explicit RandomKernel(const KernelInfo& info) {
    const Node& node = info.node;
    if (node.has_attr("seed")) seed_ = node.attr_float("seed");
    if (node.has_attr("dtype")) dtype_ = static_cast<DType>(node.attr_int("dtype"));
    if constexpr (K == RandomKind::Uniform) {
      a_ = node.attr_float("low", 0.f);
      b_ = node.attr_float("high", 1.f);
      if (!(b_ >= a_)) node.fail("high ", b_, " must not be below low ", a_);
    } else if constexpr (K == RandomKind::Normal) {
      a_ = node.attr_float("mean", 0.f);
      b_ = node.attr_float("scale", 1.f);
      if (!(b_ >= 0)) node.fail("scale must be non-negative, got ", b_);
    }
    if constexpr (!Like && K != RandomKind::Bernoulli) shape_ = node.attr_ints("shape");
    if (dtype_ && !is_storable(*dtype_)) node.fail("unsupported dtype ", static_cast<int>(*dtype_));
  }

  void compute(KernelContext& ctx) const override {
    Shape shape = shape_;
    DType out_t = dtype_.value_or(DType::Float32);
    const Tensor* in = nullptr;
    if constexpr (Like || K == RandomKind::Bernoulli) {
      in = &ctx.input(0);
      shape = in->shape();
      out_t = dtype_.value_or(in->dtype());
    }
    if constexpr (K != RandomKind::Bernoulli)
      if (!is_floating(out_t)) ctx.fail("dtype must be floating point, got ", dtype_name(out_t));
    for (int64_t d : shape)
      if (d < 0) ctx.fail("shape ", shape_to_string(shape), " has a negative dimension");
    Tensor& y = ctx.allocate_output(0, shape, out_t);
    std::mt19937_64 engine = make_engine(seed_, ctx);
    visit_dtype(out_t, [&](auto tag) {
      using T = decltype(tag);
      T* out = y.data<T>();
      const int64_t n = y.numel();
      if constexpr (K == RandomKind::Uniform) {
        std::uniform_real_distribution<double> dist(a_, b_);
        for (int64_t i = 0; i < n; ++i)
          out[i] = store_as<T>(static_cast<compute_t<T>>(dist(engine)));
      } else if constexpr (K == RandomKind::Normal) {
        std::normal_distribution<double> dist(a_, b_);
        for (int64_t i = 0; i < n; ++i)
          out[i] = store_as<T>(static_cast<compute_t<T>>(dist(engine)));
      } else {
        std::uniform_real_distribution<double> dist(0.0, 1.0);
        for (int64_t i = 0; i < n; ++i) {
          const double p = in->item_as_double(i);
          if (!(p >= 0 && p <= 1)) ctx.fail("probability ", p, " is outside [0, 1]");
          out[i] = store_as<T>(static_cast<compute_t<T>>(dist(engine) < p ? 1 : 0));
        }
      }
    });
  }

 private:
  std::optional<float> seed_;
  std::optional<DType> dtype_;
  double a_ = 0, b_ = 1;
  Shape shape_;
};

DPRUN_REGISTER_KERNEL({.op_type = "RandomUniform",
                       .since = 1,
                       .factory = make_kernel<RandomKernel<RandomKind::Uniform, false>>});
DPRUN_REGISTER_KERNEL({.op_type = "RandomNormal",
                       .since = 1,
                       .factory = make_kernel<RandomKernel<RandomKind::Normal, false>>});
DPRUN_REGISTER_KERNEL({.op_type = "RandomUniformLike",
                       .since = 1,
                       .factory = make_kernel<RandomKernel<RandomKind::Uniform, true>>});
DPRUN_REGISTER_KERNEL({.op_type = "RandomNormalLike",
                       .since = 1,
                       .factory = make_kernel<RandomKernel<RandomKind::Normal, true>>});
DPRUN_REGISTER_KERNEL({.op_type = "Bernoulli",
                       .since = 15,
                       .dtypes = {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16},
                       .factory = make_kernel<RandomKernel<RandomKind::Bernoulli, false>>});

}  // namespace
}  // namespace dprun

// The ops' facts (engine/op_facts.h): output types, shapes, 16-bit and layout policy.
namespace dprun {
namespace {
// Kept in float32: random draws: 16 bits would round its probabilities.
DPRUN_REGISTER_OP_FACTS({.op_type = "Bernoulli",
                         .dtype = OutputDTypeRule::from_attribute("dtype"),
                         .float32_only = true,
                         .random = true});
// No kernel yet; its facts still tell the gradient builder its output type.
DPRUN_REGISTER_OP_FACTS({.op_type = "Multinomial",
                         .dtype = OutputDTypeRule::from_attribute("dtype", DType::Int32),
                         .random = true});
// Kept in float32: random draws: 16 bits would round them to a coarse grid.
DPRUN_REGISTER_OP_FACTS({.op_type = "RandomNormal",
                         .dtype = OutputDTypeRule::from_attribute("dtype"),
                         .float32_only = true,
                         .random = true});
// Kept in float32: random draws: 16 bits would round them to a coarse grid.
DPRUN_REGISTER_OP_FACTS({.op_type = "RandomNormalLike",
                         .dtype = OutputDTypeRule::from_attribute("dtype"),
                         .float32_only = true,
                         .random = true});
// Kept in float32: random draws: 16 bits would round them to a coarse grid.
DPRUN_REGISTER_OP_FACTS({.op_type = "RandomUniform",
                         .dtype = OutputDTypeRule::from_attribute("dtype"),
                         .float32_only = true,
                         .random = true});
// Kept in float32: random draws: 16 bits would round them to a coarse grid.
DPRUN_REGISTER_OP_FACTS({.op_type = "RandomUniformLike",
                         .dtype = OutputDTypeRule::from_attribute("dtype"),
                         .float32_only = true,
                         .random = true});

}  // namespace
}  // namespace dprun
