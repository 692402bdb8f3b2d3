// Constant, ConstantOfShape and EyeLike: outputs built from attributes and shapes.
#include "engine/autograd/shape_rules.h"
#include "engine/constant_value.h"
#include "engine/op_facts.h"
#include "ops/array/shape_ops.h"

namespace dprun {
namespace {

// The value is built once; every run returns the same (read-only) tensor without copying.
class ConstantKernel : public OpKernel {
 public:
  explicit ConstantKernel(const KernelInfo& info) : value_(constant_node_value(info.node)) {}
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

// The ops' facts (engine/op_facts.h): output types, shapes, 16-bit and layout policy.
namespace dprun {
namespace {

std::optional<SymbolicShape> constant_shape(const ShapeQuery& q) {
  if (q.output != 0 || !q.node.has_attr("value")) return std::nullopt;
  return from_dims(q.node.attr_tensor("value").shape());
}

// Its input holds the output's dims; its length is the output's rank.
std::optional<SymbolicShape> constant_of_shape_shape(const ShapeQuery& q) {
  if (q.output != 0) return std::nullopt;
  if (auto c = q.constant(0)) return dims_in(*c);
  auto length = q.length_of(0);
  if (!length) return std::nullopt;
  return unknown_dims(static_cast<size_t>(*length));
}

// The type of the `value` tensor (other value_* attributes: unknown).
std::optional<DType> constant_dtype(const Node& node, size_t, const InputDType& input_dtype) {
  if (node.has_attr("value")) return node.attr_tensor("value").dtype();
  return first_present_input_dtype(node, 0, input_dtype);
}

// The type of the `value` tensor; float32 (the schema's default value, 0.0f) without one.
std::optional<DType> constant_of_shape_dtype(const Node& node, size_t, const InputDType&) {
  return node.has_attr("value") ? node.attr_tensor("value").dtype() : DType::Float32;
}

DPRUN_REGISTER_OP_FACTS({.op_type = "Constant",
                         .dtype_function = constant_dtype,
                         .shape_rule = constant_shape});
DPRUN_REGISTER_OP_FACTS({.op_type = "ConstantOfShape",
                         .dtype_function = constant_of_shape_dtype,
                         .shape_rule = constant_of_shape_shape});
DPRUN_REGISTER_OP_FACTS({.op_type = "EyeLike", .dtype = OutputDTypeRule::from_attribute("dtype")});

}  // namespace
}  // namespace dprun
