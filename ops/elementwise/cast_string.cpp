// Cast and CastLike to and from string tensors. Registered above the numeric Cast kernels
// and declines every node that involves no string, so those keep handling numeric casts.
// Numbers print as the shortest text that reads back to the same value (numpy's repr for
// float32/float64, "NaN", "INF", "-INF"); text parses with strtod/strtoll semantics.
#include <charconv>
#include <cmath>
#include <cstdlib>

#include "ops/common/elementwise.h"

namespace dprun::ew {
namespace {

template <class T>
std::string number_to_string(T v) {
  if constexpr (std::is_same_v<T, bool>) {
    return v ? "1" : "0";
  } else if constexpr (std::is_floating_point_v<T> || is_half_v<T>) {
    using F = std::conditional_t<std::is_same_v<T, double>, double, float>;
    F f = static_cast<F>(v);
    if (std::isnan(f)) return "NaN";
    if (std::isinf(f)) return f > 0 ? "INF" : "-INF";
    char buf[64];
    auto res = std::to_chars(buf, buf + sizeof(buf), f);
    return std::string(buf, res.ptr);
  } else {
    return std::to_string(v);
  }
}

template <class T>
T string_to_number(const KernelContext& ctx, const std::string& s) {
  const char* begin = s.c_str();
  char* end = nullptr;
  T out{};
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    if constexpr (std::is_signed_v<T>)
      out = static_cast<T>(std::strtoll(begin, &end, 10));
    else
      out = static_cast<T>(std::strtoull(begin, &end, 10));
  } else {
    out = convert<T>(std::strtod(begin, &end));  // floats, 16-bit floats and bool
  }
  if (end == begin) ctx.fail("cannot parse '", s, "' as ", dtype_name(dtype_of<T>()));
  return out;
}

void cast_strings(KernelContext& ctx, const Tensor& in, DType to) {
  if (in.dtype() == to) {
    ctx.set_output(0, in);
    return;
  }
  Tensor x = in.to(Device::cpu());
  Tensor& y = ctx.allocate_output(0, in.shape(), to);
  if (to == DType::String) {
    std::string* out = y.data<std::string>();
    visit_dtype(x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const T* src = x.data<T>();
      for (int64_t i = 0; i < x.numel(); ++i) out[i] = number_to_string(src[i]);
    });
    return;
  }
  if (x.dtype() != DType::String) ctx.fail("expected a string input, got ", x.describe());
  const std::string* src = x.data<std::string>();
  visit_dtype(to, [&](auto tag) {
    using T = decltype(tag);
    T* out = y.data<T>();
    for (int64_t i = 0; i < x.numel(); ++i) out[i] = string_to_number<T>(ctx, src[i]);
  });
}

bool is_string_input(const KernelInfo& info, size_t i) {
  return i < info.input_types.size() && info.input_types[i] &&
         info.input_types[i]->dtype == DType::String;
}

class CastStringKernel : public OpKernel {
 public:
  explicit CastStringKernel(DType to) : to_(to) {}
  void compute(KernelContext& ctx) const override { cast_strings(ctx, ctx.input(0), to_); }

 private:
  DType to_;
};

// Only nodes that involve a string; nullptr hands the node to the numeric Cast.
std::unique_ptr<OpKernel> make_cast(const KernelInfo& info) {
  const Attribute* a = info.node.find_attr("to");
  if (a == nullptr) return nullptr;
  DType to = DType::Undefined;
  if (a->kind == Attribute::Kind::Int) to = static_cast<DType>(a->i);
  if (a->kind == Attribute::Kind::String && a->s == "STRING") to = DType::String;
  if (to == DType::String || (is_string_input(info, 0) && is_storable(to)))
    return std::make_unique<CastStringKernel>(to);
  return nullptr;
}

class CastLikeStringKernel : public OpKernel {
 public:
  explicit CastLikeStringKernel(const KernelInfo&) {}
  void compute(KernelContext& ctx) const override {
    cast_strings(ctx, ctx.input(0), ctx.input(1).dtype());
  }
};

std::unique_ptr<OpKernel> make_cast_like(const KernelInfo& info) {
  if (is_string_input(info, 0) || is_string_input(info, 1))
    return std::make_unique<CastLikeStringKernel>(info);
  return nullptr;
}

DPRUN_REGISTER_KERNEL(
    {.op_type = "Cast", .since = 1, .priority = 1, .impl = "string", .factory = make_cast});
DPRUN_REGISTER_KERNEL({.op_type = "CastLike",
                       .since = 15,
                       .priority = 1,
                       .impl = "string",
                       .factory = make_cast_like});

}  // namespace
}  // namespace dprun::ew
