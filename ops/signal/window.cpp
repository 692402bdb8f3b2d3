// HannWindow, HammingWindow, BlackmanWindow: generalized cosine windows of a given length.
// w[n] = a0 - a1 cos(2 pi n / D) + a2 cos(4 pi n / D), D = size (periodic) or size - 1.
#include <cmath>
#include <numbers>

#include "engine/op_facts.h"
#include "ops/common/reduce_common.h"

namespace dprun {
namespace {

enum class WindowKind { Hann, Hamming, Blackman };

template <WindowKind K>
class WindowKernel : public OpKernel {
 public:
  explicit WindowKernel(const KernelInfo& info) {
    periodic_ = info.node.attr_int("periodic", 1) != 0;
    out_type_ = static_cast<DType>(info.node.attr_int("output_datatype", 1));
    if (!is_floating(out_type_) && !is_integral(out_type_))
      info.node.fail("unsupported output_datatype ", static_cast<int>(out_type_));
  }

  void compute(KernelContext& ctx) const override {
    const int64_t size = read_int_scalar(ctx, ctx.input(0), "size");
    if (size < 0) ctx.fail("size must be non-negative, got ", size);
    double a0 = 0.5, a1 = 0.5, a2 = 0;
    if constexpr (K == WindowKind::Hamming) {
      a0 = 25.0 / 46.0;
      a1 = 1 - a0;
    } else if constexpr (K == WindowKind::Blackman) {
      a0 = 0.42;
      a1 = 0.5;
      a2 = 0.08;
    }
    const double denom = periodic_ ? static_cast<double>(size) : static_cast<double>(size - 1);
    Tensor& y = ctx.allocate_output(0, {size}, out_type_);
    visit_dtype(out_type_, [&](auto tag) {
      using T = decltype(tag);
      T* out = y.data<T>();
      for (int64_t n = 0; n < size; ++n) {
        const double ph = denom > 0 ? 2 * std::numbers::pi * static_cast<double>(n) / denom : 0;
        const double v = a0 - a1 * std::cos(ph) + a2 * std::cos(2 * ph);
        out[n] = store_as<T>(static_cast<compute_t<T>>(v));
      }
    });
  }

 private:
  bool periodic_ = true;
  DType out_type_ = DType::Float32;
};

const std::vector<DType> kSizeTypes = {DType::Int32, DType::Int64};

DPRUN_REGISTER_KERNEL({.op_type = "HannWindow",
                       .since = 17,
                       .dtypes = kSizeTypes,
                       .factory = make_kernel<WindowKernel<WindowKind::Hann>>});
DPRUN_REGISTER_KERNEL({.op_type = "HammingWindow",
                       .since = 17,
                       .dtypes = kSizeTypes,
                       .factory = make_kernel<WindowKernel<WindowKind::Hamming>>});
DPRUN_REGISTER_KERNEL({.op_type = "BlackmanWindow",
                       .since = 17,
                       .dtypes = kSizeTypes,
                       .factory = make_kernel<WindowKernel<WindowKind::Blackman>>});

}  // namespace
}  // namespace dprun

// The ops' facts (engine/op_facts.h): output types, shapes, 16-bit and layout policy.
namespace dprun {
namespace {
DPRUN_REGISTER_OP_FACTS({.op_type = "BlackmanWindow"});
DPRUN_REGISTER_OP_FACTS({.op_type = "HammingWindow"});
DPRUN_REGISTER_OP_FACTS({.op_type = "HannWindow"});

}  // namespace
}  // namespace dprun
