// Concat and Split along one axis: each is a sequence of contiguous block copies per outer
// index, independent of the dtype.
#include "ops/array/concat_split.h"
#include "engine/autograd/shape_rules.h"
#include "engine/op_facts.h"

namespace dprun {
namespace {

class ConcatKernel : public OpKernel {
 public:
  explicit ConcatKernel(const KernelInfo& info) : params_(info) {}
  void compute(KernelContext& ctx) const override {
    const ConcatLayout c = params_.layout(ctx);
    const int64_t axis = c.axis, outer = c.outer, inner = c.inner;
    Tensor& y = ctx.allocate_output(0, c.out_shape, c.parts[0]->dtype());
    const size_t elem = dtype_size(y.dtype());
    const size_t out_row =
        static_cast<size_t>(c.out_shape[static_cast<size_t>(axis)] * inner) * elem;
    char* dst = static_cast<char*>(y.raw_data());
    ctx.parallel_for(
        outer, std::max<int64_t>(1, (1 << 16) / static_cast<int64_t>(out_row + 1)),
        [&](int64_t begin, int64_t end) {
          for (int64_t o = begin; o < end; ++o) {
            char* row = dst + static_cast<size_t>(o) * out_row;
            for (const Tensor* t : c.parts) {
              const size_t bytes =
                  static_cast<size_t>(t->shape()[static_cast<size_t>(axis)] * inner) * elem;
              if (bytes == 0) continue;
              std::memcpy(row,
                          static_cast<const char*>(t->raw_data()) + static_cast<size_t>(o) * bytes,
                          bytes);
              row += bytes;
            }
          }
        });
  }

 private:
  ConcatParams params_;
};

class SplitKernel : public OpKernel {
 public:
  explicit SplitKernel(const KernelInfo& info) : params_(info) {}
  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    const SplitLayout s = params_.layout(ctx, x.shape());
    const int64_t axis = s.axis, outer = s.outer, inner = s.inner;
    const int64_t dim = x.shape()[static_cast<size_t>(axis)];
    const size_t elem = dtype_size(x.dtype());
    const size_t in_row = static_cast<size_t>(dim * inner) * elem;
    const char* src = static_cast<const char*>(x.raw_data());
    int64_t start = 0;
    for (size_t i = 0; i < s.sizes.size(); ++i) {
      const int64_t len = s.sizes[i];
      if (ctx.output_wanted(i)) {
        Shape shape = x.shape();
        shape[static_cast<size_t>(axis)] = len;
        Tensor& y = ctx.allocate_output(i, shape, x.dtype());
        const size_t bytes = static_cast<size_t>(len * inner) * elem;
        const size_t offset = static_cast<size_t>(start * inner) * elem;
        char* dst = static_cast<char*>(y.raw_data());
        if (bytes > 0)
          ctx.parallel_for(outer, std::max<int64_t>(1, (1 << 16) / static_cast<int64_t>(bytes)),
                           [&](int64_t begin, int64_t end) {
                             for (int64_t o = begin; o < end; ++o)
                               std::memcpy(dst + static_cast<size_t>(o) * bytes,
                                           src + static_cast<size_t>(o) * in_row + offset, bytes);
                           });
      }
      start += len;
    }
  }

 private:
  SplitParams params_;
};

DPRUN_REGISTER_KERNEL({.op_type = "Concat", .since = 1, .factory = make_kernel<ConcatKernel>});
DPRUN_REGISTER_KERNEL({.op_type = "Split", .since = 1, .factory = make_kernel<SplitKernel>});

}  // namespace
}  // namespace dprun

// The ops' facts (engine/op_facts.h): output types, shapes, 16-bit and layout policy.
namespace dprun {
namespace {

// The first known input's shape with the sum of the inputs' sizes on `axis` (unknown unless
// every one is known).
std::optional<SymbolicShape> concat_shape(const ShapeQuery& q) {
  if (q.output != 0) return std::nullopt;
  std::optional<SymbolicShape> first;
  bool all_known = true;
  int64_t total = 0;
  std::optional<size_t> axis;
  for (size_t i = 0; i < q.node.inputs.size(); ++i) {
    auto s = q.input(i);
    if (!s) {
      all_known = false;
      continue;
    }
    auto a = axis_in(q.node.attr_int("axis", 0), static_cast<int64_t>(s->size()));
    if (!a) return std::nullopt;
    axis = static_cast<size_t>(*a);
    if (!first) first = s;
    const Dim& d = (*s)[*axis];
    if (d.is_known())
      total += d.value;
    else
      all_known = false;
  }
  if (!first) return std::nullopt;
  (*first)[*axis] = all_known ? Dim::known(total) : Dim{};
  return first;
}

/// Concat runs on NHWC values when all its inputs are, along the axis's NHWC position.
bool concat_runs_in_nhwc(const LayoutQuery& query) {
  for (const auto& in : query.node.inputs)
    if (!query.is_nhwc(in)) return false;
  return true;
}

void concat_to_nhwc(LayoutEdit& edit) {
  int64_t axis = edit.node.attr_int("axis", 1);
  if (axis < 0) axis += 4;
  static const int64_t to_nhwc_axis[4] = {0, 3, 1, 2};
  // An invalid axis is left for the Concat kernel to report.
  if (axis >= 0 && axis < 4) edit.node.attributes["axis"] = Attribute::of_int(to_nhwc_axis[axis]);
}

DPRUN_REGISTER_OP_FACTS({.op_type = "Concat",
                         .shape_rule = concat_shape,
                         .layout = {.runs_in_nhwc = concat_runs_in_nhwc,
                                    .all_inputs = true,
                                    .to_nhwc = concat_to_nhwc}});
DPRUN_REGISTER_OP_FACTS({.op_type = "Split"});

}  // namespace
}  // namespace dprun
