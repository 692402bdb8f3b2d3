// Concat and Split along one axis: each is a sequence of contiguous block copies per outer
// index, independent of the dtype.
#include "ops/cpu/data_movement.h"

namespace dprun {
namespace {

class ConcatKernel : public OpKernel {
 public:
  // Concat-1 defaults the axis to 1; from opset 4 it is required.
  explicit ConcatKernel(const KernelInfo& info)
      : axis_(info.opset < 4 ? info.node.attr_int("axis", 1) : info.node.attr_int("axis")) {}
  void compute(KernelContext& ctx) const override {
    std::vector<const Tensor*> parts;
    for (size_t i = 0; i < ctx.input_count(); ++i)
      if (ctx.has_input(i)) parts.push_back(&ctx.input(i));
    if (parts.empty()) ctx.fail("needs at least one input");
    const Tensor& first = *parts[0];
    const int64_t r = first.rank();
    if (r == 0) ctx.fail("cannot concatenate scalars");
    const int64_t axis = axis_ < 0 ? axis_ + r : axis_;
    if (axis < 0 || axis >= r) ctx.fail("axis ", axis_, " is out of range for rank ", r);
    Shape out_shape = first.shape();
    out_shape[static_cast<size_t>(axis)] = 0;
    for (const Tensor* t : parts) {
      bool ok = t->rank() == r && t->dtype() == first.dtype();
      for (int64_t d = 0; ok && d < r; ++d)
        ok = d == axis ||
             t->shape()[static_cast<size_t>(d)] == first.shape()[static_cast<size_t>(d)];
      if (!ok)
        ctx.fail("inputs ", first.describe(), " and ", t->describe(),
                 " cannot be concatenated on axis ", axis_);
      out_shape[static_cast<size_t>(axis)] += t->shape()[static_cast<size_t>(axis)];
    }
    Tensor& y = ctx.allocate_output(0, out_shape, first.dtype());
    const size_t elem = dtype_size(first.dtype());
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < axis; ++d) outer *= out_shape[static_cast<size_t>(d)];
    for (int64_t d = axis + 1; d < r; ++d) inner *= out_shape[static_cast<size_t>(d)];
    const size_t out_row = static_cast<size_t>(out_shape[static_cast<size_t>(axis)] * inner) * elem;
    char* dst = static_cast<char*>(y.raw_data());
    ctx.parallel_for(
        outer, std::max<int64_t>(1, (1 << 16) / static_cast<int64_t>(out_row + 1)),
        [&](int64_t begin, int64_t end) {
          for (int64_t o = begin; o < end; ++o) {
            char* row = dst + static_cast<size_t>(o) * out_row;
            for (const Tensor* t : parts) {
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
  int64_t axis_;
};

// Split: sizes come from the `split` attribute (opset < 13; Split-1 also accepted them as
// input 1), from input 1 (13+), or are equal parts (ceil-sized with num_outputs at 18).
class SplitKernel : public OpKernel {
 public:
  explicit SplitKernel(const KernelInfo& info)
      : opset_(info.opset), axis_(info.node.attr_int("axis", 0)) {
    if (info.node.has_attr("split")) split_attr_ = info.node.attr_ints("split");
    num_outputs_ = info.node.attr_int("num_outputs", 0);
  }
  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    const int64_t r = x.rank();
    if (r == 0) ctx.fail("cannot split a scalar");
    const int64_t axis = axis_ < 0 ? axis_ + r : axis_;
    if (axis < 0 || axis >= r) ctx.fail("axis ", axis_, " is out of range for rank ", r);
    const int64_t dim = x.shape()[static_cast<size_t>(axis)];
    const int64_t n = static_cast<int64_t>(ctx.output_count());
    std::vector<int64_t> sizes = split_attr_;
    if (sizes.empty() && ctx.has_input(1)) sizes = read_int64_values(ctx.input(1), ctx, "split");
    if (sizes.empty()) {
      if (num_outputs_ > 0 && num_outputs_ != n)
        ctx.fail("num_outputs ", num_outputs_, " does not match the ", n, " outputs");
      if (opset_ >= 18 && num_outputs_ > 0) {
        const int64_t chunk = (dim + n - 1) / n;
        for (int64_t i = 0; i < n; ++i)
          sizes.push_back(std::max<int64_t>(0, std::min(chunk, dim - chunk * i)));
      } else {
        if (dim % n != 0)
          ctx.fail("dimension ", axis, " of ", shape_to_string(x.shape()),
                   " cannot be split evenly into ", n, " outputs");
        sizes.assign(static_cast<size_t>(n), dim / n);
      }
    }
    if (static_cast<int64_t>(sizes.size()) != n)
      ctx.fail("split has ", sizes.size(), " entries but the node has ", n, " outputs");
    int64_t sum = 0;
    for (int64_t s : sizes) {
      if (s < 0) ctx.fail("split sizes ", shape_to_string(sizes), " contain a negative size");
      sum += s;
    }
    if (sum != dim)
      ctx.fail("split sizes ", shape_to_string(sizes), " sum to ", sum, " but dimension ", axis,
               " of ", shape_to_string(x.shape()), " has size ", dim);
    const size_t elem = dtype_size(x.dtype());
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < axis; ++d) outer *= x.shape()[static_cast<size_t>(d)];
    for (int64_t d = axis + 1; d < r; ++d) inner *= x.shape()[static_cast<size_t>(d)];
    const size_t in_row = static_cast<size_t>(dim * inner) * elem;
    const char* src = static_cast<const char*>(x.raw_data());
    int64_t start = 0;
    for (int64_t i = 0; i < n; ++i) {
      const int64_t len = sizes[static_cast<size_t>(i)];
      if (ctx.output_wanted(static_cast<size_t>(i))) {
        Shape shape = x.shape();
        shape[static_cast<size_t>(axis)] = len;
        Tensor& y = ctx.allocate_output(static_cast<size_t>(i), shape, x.dtype());
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
  int64_t opset_;
  int64_t axis_;
  std::vector<int64_t> split_attr_;
  int64_t num_outputs_ = 0;
};

DPRUN_REGISTER_KERNEL({.op_type = "Concat", .since = 1, .factory = make_kernel<ConcatKernel>});
DPRUN_REGISTER_KERNEL({.op_type = "Split", .since = 1, .factory = make_kernel<SplitKernel>});

}  // namespace
}  // namespace dprun
