// Constant, ConstantOfShape and EyeLike: outputs built from attributes and shapes.
#include "ops/cpu/shape_ops.h"

namespace dprun {
namespace {

// The value is built once; every run returns the same (read-only) tensor without copying.
class ConstantKernel : public OpKernel {
 public:
  explicit ConstantKernel(const KernelInfo& info) {
    const Node& n = info.node;
    if (n.has_attr("value")) {
      value_ = n.attr_tensor("value");
    } else if (n.has_attr("value_float")) {
      value_ = Tensor::scalar<float>(n.attr_float("value_float"));
    } else if (n.has_attr("value_floats")) {
      std::vector<float> v = n.attr_floats("value_floats");
      value_ = Tensor::from_vector<float>({static_cast<int64_t>(v.size())}, v);
    } else if (n.has_attr("value_int")) {
      value_ = Tensor::scalar<int64_t>(n.attr_int("value_int"));
    } else if (n.has_attr("value_ints")) {
      std::vector<int64_t> v = n.attr_ints("value_ints");
      value_ = Tensor::from_vector<int64_t>({static_cast<int64_t>(v.size())}, v);
    } else if (n.has_attr("sparse_value")) {
      n.fail("sparse_value constants are not supported");
    } else if (n.has_attr("value_string") || n.has_attr("value_strings")) {
      n.fail("string constants are not supported");
    } else {
      n.fail("needs one of the attributes value, value_float(s) or value_int(s)");
    }
    if (!value_.defined()) n.fail("the value attribute holds no tensor");
  }
  void compute(KernelContext& ctx) const override { ctx.set_output(0, value_.to(ctx.device())); }

 private:
  Tensor value_;
};

class ConstantOfShapeKernel : public OpKernel {
 public:
  explicit ConstantOfShapeKernel(const KernelInfo& info) : params_(info) {}
  void compute(KernelContext& ctx) const override {
    const Tensor& value = params_.value();
    Tensor& y = ctx.allocate_output(0, params_.shape(ctx), value.dtype());
    visit_element_size(dtype_size(value.dtype()), [&](auto zero) {
      using U = decltype(zero);
      const U v = *static_cast<const U*>(value.raw_data());
      U* out = static_cast<U*>(y.raw_data());
      ctx.parallel_for(y.numel(), 1 << 16,
                       [&](int64_t b, int64_t e) { std::fill(out + b, out + e, v); });
    });
  }

 private:
  ConstantOfShapeParams params_;
};

class EyeLikeKernel : public OpKernel {
 public:
  explicit EyeLikeKernel(const KernelInfo& info) : k_(info.node.attr_int("k", 0)) {
    if (info.node.has_attr("dtype")) dtype_ = static_cast<DType>(info.node.attr_int("dtype"));
  }
  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    if (x.rank() != 2) ctx.fail("input must be 2-D, got ", x.describe());
    const DType dtype = dtype_ == DType::Undefined ? x.dtype() : dtype_;
    if (!is_storable(dtype)) ctx.fail("unsupported dtype ", static_cast<int>(dtype));
    Tensor& y = ctx.allocate_output(0, x.shape(), dtype);
    std::memset(y.raw_data(), 0, y.nbytes());
    const int64_t rows = x.shape()[0], cols = x.shape()[1];
    visit_dtype(dtype, [&](auto zero) {
      using T = decltype(zero);
      T* out = static_cast<T*>(y.raw_data());
      T one;
      if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>)
        one = T(1.0f);
      else
        one = static_cast<T>(1);
      for (int64_t i = 0; i < rows; ++i) {
        const int64_t j = i + k_;
        if (j >= 0 && j < cols) out[i * cols + j] = one;
      }
    });
  }

 private:
  int64_t k_;
  DType dtype_ = DType::Undefined;
};

DPRUN_REGISTER_KERNEL({.op_type = "Constant", .since = 1, .factory = make_kernel<ConstantKernel>});
DPRUN_REGISTER_KERNEL({.op_type = "ConstantOfShape",
                       .since = 9,
                       .factory = make_kernel<ConstantOfShapeKernel>});
DPRUN_REGISTER_KERNEL({.op_type = "EyeLike", .since = 9, .factory = make_kernel<EyeLikeKernel>});

}  // namespace
}  // namespace dprun
