// The compute of Cast and CastLike on CUDA (defined in ops/elementwise/cast_cuda_def.cpp) between
// float32, float64, float16, bfloat16, the signed and unsigned 8 to 64 bit integers and bool,
// converting values exactly as ops/elementwise/cast.cpp does (ew::convert): float -> integer
// truncates toward zero and saturates at the target's range, NaN -> 0; anything -> bool tests != 0
// (so NaN -> true); float16 and bfloat16 go through float both ways, with round-to-nearest-even (so
// float64 -> float16 rounds twice, like the CPU); integers wrap. 16-bit NaNs are encoded as
// engine/half.h encodes them (ops/cuda/half_convert.cuh).
//
// Declined by the definitions (run on the host): targets or sources of other dtypes (string),
// and the string-named `to` of Cast-1..5. A Cast of a constant input keeps its result per
// parameter version.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <limits>
#include <optional>
#include <type_traits>

#include "ops/constant_casts.h"
#include "ops/cuda/defs/cuda_compute.h"
#include "ops/cuda/elementwise.cuh"
#include "ops/cuda/half_convert.cuh"
#include "ops/elementwise/cast_types.h"

namespace dprun {
namespace {

/// Calls f(T{}) with the element type of `t`; false when `t` is not a kCastTypes dtype.
template <class F>
bool visit_cast_type(DType t, F&& f) {
  switch (t) {
    case DType::Float32:
      return f(float{}), true;
    case DType::Float64:
      return f(double{}), true;
    case DType::Float16:
      return f(Float16{}), true;
    case DType::BFloat16:
      return f(BFloat16{}), true;
    case DType::Int8:
      return f(int8_t{}), true;
    case DType::Int16:
      return f(int16_t{}), true;
    case DType::Int32:
      return f(int32_t{}), true;
    case DType::Int64:
      return f(int64_t{}), true;
    case DType::UInt8:
      return f(uint8_t{}), true;
    case DType::UInt16:
      return f(uint16_t{}), true;
    case DType::UInt32:
      return f(uint32_t{}), true;
    case DType::UInt64:
      return f(uint64_t{}), true;
    case DType::Bool:
      return f(bool{}), true;
    default:
      return false;
  }
}

/// The saturation bounds of a float -> integer conversion, in both types (powers of two, or
/// zero, so exact in From).
template <class To, class From>
struct Saturation {
  static constexpr From from_lo = static_cast<From>(std::numeric_limits<To>::lowest());
  static constexpr From from_hi = static_cast<From>(std::numeric_limits<To>::max());
  static constexpr To lo = std::numeric_limits<To>::lowest();
  static constexpr To hi = std::numeric_limits<To>::max();
};

template <class To, class From>
__device__ To cast_value(From v) {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (cuda_half::is_16bit_v<From>) {
    return cast_value<To>(cuda_half::to_float(v));
  } else if constexpr (cuda_half::is_16bit_v<To>) {
    return cuda_half::from_float<To>(static_cast<float>(v));
  } else if constexpr (std::is_same_v<To, bool>) {
    return v != From(0);
  } else if constexpr (std::is_integral_v<To> && std::is_floating_point_v<From>) {
    using S = Saturation<To, From>;
    if (v != v) return To(0);
    if (v <= S::from_lo) return S::lo;
    if (v >= S::from_hi) return S::hi;
    return static_cast<To>(v);
  } else {
    return static_cast<To>(v);
  }
}

template <class From, class To>
__global__ void cast_kernel(const From* __restrict__ in, To* __restrict__ out, int64_t n) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    out[i] = cast_value<To>(in[i]);
}

void cast_to(KernelContext& ctx, const Tensor& in, DType to) {
  if (in.dtype() == to) {
    ctx.set_output(0, in);
    return;
  }
  Tensor& out = ctx.allocate_output(0, in.shape(), to);
  const bool known = visit_cast_type(in.dtype(), [&](auto from_tag) {
    using From = decltype(from_tag);
    visit_cast_type(to, [&](auto to_tag) {
      using To = decltype(to_tag);
      const int64_t n = in.numel();
      if (n == 0) return;
      cast_kernel<From, To>
          <<<cuda_ew::blocks_for(n), cuda_ew::kThreads, 0, cuda_ew::stream_of(ctx)>>>(
              static_cast<const From*>(in.raw_data()), static_cast<To*>(out.raw_data()), n);
      cuda_ew::check_launch(ctx);
    });
  });
  if (!known) ctx.fail("cannot cast from dtype ", dtype_name(in.dtype()), " on CUDA");
}

/// Cast, whose target is fixed when the kernel is built, and CastLike (no fixed target), which
/// takes input 1's dtype. A Cast of a constant input keeps its result while the parameters keep
/// their version, as the CPU Cast does (ops/constant_casts.h).
class CastCuda : public OpKernel {
 public:
  CastCuda(std::optional<DType> to, bool constant_input) : to_(to), constant_(constant_input) {}
  void compute(KernelContext& ctx) const override {
    const DType to = to_ ? *to_ : ctx.input(1).dtype();
    if (!is_cast_type(to)) ctx.fail("cannot cast to dtype ", dtype_name(to), " on CUDA");
    const Tensor& in = ctx.input(0);
    if (!constant_ || in.dtype() == to) return cast_to(ctx, in, to);
    kept_.cast_or_reuse(ctx, in, [&] { cast_to(ctx, in, to); });
  }

 private:
  std::optional<DType> to_;
  bool constant_;  // a Cast (fixed target) of a constant input
  ConstantCasts kept_;
};

/// A Cast whose numeric `to` is a kCastTypes dtype (the definition declines the others).
std::unique_ptr<OpKernel> make_cast(const KernelInfo& info) {
  return std::make_unique<CastCuda>(static_cast<DType>(info.node.attr_int("to")),
                                    info.constant_inputs.count(0) > 0);
}

/// A CastLike whose target, when known, is a kCastTypes dtype (the definition declines the
/// others).
std::unique_ptr<OpKernel> make_cast_like(const KernelInfo&) {
  return std::make_unique<CastCuda>(std::nullopt, false);
}

DPRUN_CUDA_COMPUTE("Cast", make_cast);
DPRUN_CUDA_COMPUTE("CastLike", make_cast_like);

}  // namespace
}  // namespace dprun
