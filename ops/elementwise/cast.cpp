// Cast and CastLike between all storable dtypes (float16/bfloat16 via float). Strings are not
// storable in a Tensor, so a cast to or from string is refused when the kernel is built.
// Float -> integer truncates toward zero and saturates at the target's range (NaN -> 0). A Cast
// of a constant input keeps its result while the parameters do not change.
#include <mutex>
#include <optional>
#include <vector>

#include "engine/op_facts.h"
#include "ops/constant_casts.h"
#include "ops/cpu/elementwise.h"

namespace dprun::ew {
namespace {

void cast_into(const ExecutionContext& exec, const Tensor& in, Tensor& out) {
  visit_dtype(in.dtype(), [&](auto from_tag) {
    using From = decltype(from_tag);
    visit_dtype(out.dtype(), [&](auto to_tag) {
      using To = decltype(to_tag);
      if constexpr (is_half_v<From> && std::is_same_v<To, float>)
        widen_map(exec, in.data<From>(), out.data<float>(), in.numel());
      else if constexpr (std::is_same_v<From, float> && is_half_v<To>)
        narrow_map(exec, in.data<float>(), out.data<To>(), in.numel());
      else
        unary_map(exec, in.data<From>(), out.data<To>(), in.numel(),
                  [](From v) { return convert<To>(v); });
    });
  });
}

void cast_to(KernelContext& ctx, const Tensor& in, DType to) {
  if (!is_storable(in.dtype())) ctx.fail("cannot cast from dtype ", dtype_name(in.dtype()));
  if (in.dtype() == to) {
    ctx.set_output(0, in);
    return;
  }
  cast_into(ctx.execution(), in, ctx.allocate_output(0, in.shape(), to));
}

/// Cast-1..5 names the target type by its TensorProto name ("FLOAT"); Cast-6+ by its number.
DType parse_to(const Node& node) {
  const Attribute* a = node.find_attr("to");
  if (!a) node.fail("attribute 'to' is required");
  DType to = DType::Undefined;
  if (a->kind == Attribute::Kind::String) {
    static const std::pair<const char*, DType> names[] = {
        {"FLOAT", DType::Float32},   {"UINT8", DType::UInt8},      {"INT8", DType::Int8},
        {"UINT16", DType::UInt16},   {"INT16", DType::Int16},      {"INT32", DType::Int32},
        {"INT64", DType::Int64},     {"STRING", DType::String},    {"BOOL", DType::Bool},
        {"FLOAT16", DType::Float16}, {"DOUBLE", DType::Float64},   {"UINT32", DType::UInt32},
        {"UINT64", DType::UInt64},   {"BFLOAT16", DType::BFloat16}};
    for (const auto& [name, t] : names)
      if (a->s == name) to = t;
    if (to == DType::Undefined) node.fail("unknown target type '", a->s, "'");
  } else {
    to = static_cast<DType>(node.attr_int("to"));
  }
  if (to == DType::String) node.fail("casting to string is not supported");
  if (!is_storable(to)) node.fail("unsupported target type ", static_cast<int>(to));
  return to;
}

class CastKernel : public OpKernel {
 public:
  explicit CastKernel(const KernelInfo& info)
      : to_(parse_to(info.node)), constant_(info.constant_inputs.count(0) > 0) {}
  void compute(KernelContext& ctx) const override {
    const Tensor& in = ctx.input(0);
    if (!constant_ || in.dtype() == to_) return cast_to(ctx, in, to_);
    kept_.cast_or_reuse(ctx, in, [&] { cast_to(ctx, in, to_); });
  }

 private:
  DType to_;
  bool constant_;
  ConstantCasts kept_;
};

class CastLikeKernel : public OpKernel {
 public:
  explicit CastLikeKernel(const KernelInfo& info) {
    if (info.input_types.size() > 1 && info.input_types[1] &&
        info.input_types[1]->dtype == DType::String)
      info.node.fail("casting to string is not supported");
  }
  void compute(KernelContext& ctx) const override {
    cast_to(ctx, ctx.input(0), ctx.input(1).dtype());
  }
};

DPRUN_REGISTER_KERNEL({.op_type = "Cast", .since = 1, .factory = make_kernel<CastKernel>});
DPRUN_REGISTER_KERNEL({.op_type = "CastLike", .since = 15, .factory = make_kernel<CastLikeKernel>});

}  // namespace
}  // namespace dprun::ew

// The ops' facts (engine/op_facts.h): output types, shapes, 16-bit and layout policy.
namespace dprun {
namespace {

// The `to` attribute.
std::optional<DType> cast_dtype(const Node& node, size_t, const InputDType&) {
  return static_cast<DType>(node.attr_int("to"));
}

DPRUN_REGISTER_OP_FACTS({.op_type = "Cast",
                         .dtype_function = cast_dtype,
                         .shape = ShapeKind::SameAsInput0,
                         .keeps_values = true});
DPRUN_REGISTER_OP_FACTS({.op_type = "CastLike",
                         .dtype = OutputDTypeRule::same_as_input(1),
                         .shape = ShapeKind::SameAsInput0});

}  // namespace
}  // namespace dprun
