// NonZero (coordinates of non-zero elements) and Compress (slices selected by a condition).
#include "engine/autograd/shape_rules.h"
#include "engine/op_facts.h"
#include "ops/common/data_movement.h"

namespace dprun {
namespace {

/// One flag per element: whether it is non-zero.
std::vector<uint8_t> nonzero_flags(const Tensor& x) {
  std::vector<uint8_t> flags(static_cast<size_t>(x.numel()));
  visit_dtype(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const T* p = x.data<T>();
    for (size_t i = 0; i < flags.size(); ++i) {
      if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>)
        flags[i] = static_cast<float>(p[i]) != 0.0f;
      else
        flags[i] = p[i] != T(0);
    }
  });
  return flags;
}

class NonZeroKernel : public OpKernel {
 public:
  explicit NonZeroKernel(const KernelInfo&) {}
  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    const std::vector<uint8_t> flags = nonzero_flags(x);
    int64_t count = 0;
    for (uint8_t f : flags) count += f;
    const int64_t r = x.rank();
    Tensor& y = ctx.allocate_output(0, {r, count}, DType::Int64);
    int64_t* out = y.data<int64_t>();
    int64_t col = 0;
    for (size_t i = 0; i < flags.size(); ++i) {
      if (!flags[i]) continue;
      int64_t rest = static_cast<int64_t>(i);
      for (int64_t d = r - 1; d >= 0; --d) {
        const int64_t size = x.shape()[static_cast<size_t>(d)];
        out[d * count + col] = rest % size;
        rest /= size;
      }
      ++col;
    }
  }
};

class CompressKernel : public OpKernel {
 public:
  explicit CompressKernel(const KernelInfo& info) : has_axis_(info.node.has_attr("axis")) {
    if (has_axis_) axis_ = info.node.attr_int("axis");
  }
  void compute(KernelContext& ctx) const override {
    const Tensor& input = ctx.input(0);
    const Tensor& cond = ctx.input(1);
    if (cond.rank() != 1) ctx.fail("condition must be 1-D, got ", cond.describe());
    // Without an axis the input is flattened first.
    const Tensor x = has_axis_ ? input : input.reshape({input.numel()});
    const int64_t r = x.rank();
    if (r == 0) ctx.fail("input must have rank >= 1 when axis is given");
    const int64_t axis = has_axis_ ? (axis_ < 0 ? axis_ + r : axis_) : 0;
    if (axis < 0 || axis >= r) ctx.fail("axis ", axis_, " is out of range for rank ", r);
    const int64_t dim = x.shape()[static_cast<size_t>(axis)];
    // Slices past the end of condition count as unselected (numpy.compress semantics).
    const std::vector<uint8_t> flags = nonzero_flags(cond);
    std::vector<int64_t> selected;
    for (size_t i = 0; i < flags.size(); ++i)
      if (flags[i]) selected.push_back(static_cast<int64_t>(i));
    if (!selected.empty() && selected.back() >= dim)
      ctx.fail("condition selects entry ", selected.back(), " but the axis has only ", dim);
    Shape out_shape = x.shape();
    out_shape[static_cast<size_t>(axis)] = static_cast<int64_t>(selected.size());
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < axis; ++d) outer *= x.shape()[static_cast<size_t>(d)];
    for (int64_t d = axis + 1; d < r; ++d) inner *= x.shape()[static_cast<size_t>(d)];
    Tensor& y = ctx.allocate_output(0, out_shape, x.dtype());
    const size_t row = static_cast<size_t>(inner) * dtype_size(x.dtype());
    const char* src = static_cast<const char*>(x.raw_data());
    char* dst = static_cast<char*>(y.raw_data());
    for (int64_t o = 0; o < outer; ++o)
      for (size_t j = 0; j < selected.size(); ++j)
        std::memcpy(dst + (static_cast<size_t>(o) * selected.size() + j) * row,
                    src + static_cast<size_t>(o * dim + selected[j]) * row, row);
  }

 private:
  bool has_axis_;
  int64_t axis_ = 0;
};

DPRUN_REGISTER_KERNEL({.op_type = "NonZero", .since = 9, .factory = make_kernel<NonZeroKernel>});
DPRUN_REGISTER_KERNEL({.op_type = "Compress", .since = 9, .factory = make_kernel<CompressKernel>});

}  // namespace
}  // namespace dprun

// The ops' facts (engine/op_facts.h): output types, shapes, 16-bit and layout policy.
namespace dprun {
namespace {

// [rank of the input, number of nonzero elements].
std::optional<SymbolicShape> nonzero_shape(const ShapeQuery& q) {
  if (q.output != 0) return std::nullopt;
  auto x = q.input(0);
  if (!x) return std::nullopt;
  return SymbolicShape{Dim::known(static_cast<int64_t>(x->size())), Dim{}};
}

DPRUN_REGISTER_OP_FACTS({.op_type = "Compress"});
DPRUN_REGISTER_OP_FACTS({.op_type = "NonZero",
                         .dtype = OutputDTypeRule::fixed(DType::Int64),
                         .shape_rule = nonzero_shape});

}  // namespace
}  // namespace dprun
