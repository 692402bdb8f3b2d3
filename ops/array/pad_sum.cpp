// PadSum(x_1, ..., x_n), domain "dprun" (from the op fusion: engine/rewrites/pad_sum_fusion.h):
// the Sum of the x_i, each padded with zeros along `axis` by begins[i] before it and ends[i]
// after it, as the gradients of Slices that cut a value into pieces are summed. When the padded
// pieces have one shape and tile the axis (each starts where the one before ends), the output
// is their concatenation, each piece copied once; otherwise each is padded and summed as the
// unfused graph does (the Sum's broadcasting included).
#include <algorithm>
#include <cstring>
#include <numeric>
#include <vector>

#include "engine/kernel.h"
#include "engine/rewrites/rewrite_domain.h"
#include "ops/cpu/plain_reference.h"

namespace dprun {
namespace {

/// A shape split at `axis`: the rows before it and the bytes of one step along it.
struct AxisSplit {
  int64_t outer = 1;
  size_t inner_bytes = 0;
};

AxisSplit split_at(const Shape& shape, int64_t axis, DType dtype) {
  AxisSplit s;
  int64_t inner = 1;
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d)
    (d < axis ? s.outer : inner) *= d == axis ? 1 : shape[static_cast<size_t>(d)];
  s.inner_bytes = static_cast<size_t>(inner) * dtype_size(dtype);
  return s;
}

class PadSumKernel : public OpKernel {
 public:
  explicit PadSumKernel(const KernelInfo& info)
      : sum_(plain_reference(info, sum_node_, "Sum", info.node.inputs.size())),
        axis_(info.node.attr_int("axis")),
        begins_(info.node.attr_ints("begins")),
        ends_(info.node.attr_ints("ends")) {
    if (begins_.size() != info.node.inputs.size() || ends_.size() != info.node.inputs.size())
      info.node.fail("begins and ends must have one value per input (", info.node.inputs.size(),
                     "), got ", begins_.size(), " and ", ends_.size());
  }

  void compute(KernelContext& ctx) const override {
    const size_t n = begins_.size();
    const Tensor& first = ctx.input(0);
    if (axis_ < 0 || axis_ >= first.rank())
      ctx.fail("axis ", axis_, " is outside input 0's ", first.rank(), " dims");
    std::vector<size_t> order(n);
    std::iota(order.begin(), order.end(), size_t{0});
    std::sort(order.begin(), order.end(),
              [&](size_t a, size_t b) { return begins_[a] < begins_[b]; });
    if (tiles(ctx, order)) return concatenate(ctx, order);
    pad_and_sum(ctx);
  }

 private:
  /// True when every input has input 0's dtype and dims but along the axis, and in `order` the
  /// pieces start where the one before ends, from 0 to the padded length they all share.
  bool tiles(const KernelContext& ctx, const std::vector<size_t>& order) const {
    const Tensor& first = ctx.input(0);
    int64_t at = 0;
    for (size_t k : order) {
      const Tensor& x = ctx.input(k);
      if (x.dtype() != first.dtype() || x.rank() != first.rank() || begins_[k] != at) return false;
      for (int64_t d = 0; d < x.rank(); ++d)
        if (d != axis_ && x.shape()[d] != first.shape()[d]) return false;
      at += x.shape()[axis_];
    }
    for (size_t k = 0; k < order.size(); ++k)
      if (begins_[k] + ctx.input(k).shape()[axis_] + ends_[k] != at) return false;
    return true;
  }

  /// The pieces side by side along the axis: rows of each copied into place.
  void concatenate(KernelContext& ctx, const std::vector<size_t>& order) const {
    const Tensor& first = ctx.input(0);
    Shape shape = first.shape();
    shape[axis_] = 0;
    for (size_t k : order) shape[axis_] += ctx.input(k).shape()[axis_];
    Tensor& y = ctx.allocate_output(0, shape, first.dtype());
    const auto [outer, inner_bytes] = split_at(shape, axis_, first.dtype());
    const size_t row_bytes = static_cast<size_t>(shape[axis_]) * inner_bytes;
    char* out = static_cast<char*>(y.raw_data());
    ctx.parallel_for(
        outer, std::max<int64_t>(1, static_cast<int64_t>(65536 / (row_bytes + 1))),
        [&](int64_t begin, int64_t end) {
          for (int64_t o = begin; o < end; ++o)
            for (size_t k : order) {
              const Tensor& x = ctx.input(k);
              const size_t bytes = static_cast<size_t>(x.shape()[axis_]) * inner_bytes;
              std::memcpy(out + static_cast<size_t>(o) * row_bytes +
                              static_cast<size_t>(begins_[k]) * inner_bytes,
                          static_cast<const char*>(x.raw_data()) + static_cast<size_t>(o) * bytes,
                          bytes);
            }
        });
  }

  /// What the unfused graph computes: each input padded with zeros, then Sum's kernel.
  void pad_and_sum(KernelContext& ctx) const {
    std::vector<Tensor> padded;
    for (size_t k = 0; k < begins_.size(); ++k) {
      const Tensor& x = ctx.input(k);
      if (axis_ >= x.rank())
        ctx.fail("axis ", axis_, " is outside input ", k, "'s ", x.rank(), " dims");
      Shape shape = x.shape();
      shape[axis_] += begins_[k] + ends_[k];
      Tensor p = Tensor::zeros(shape, x.dtype());
      const auto [outer, inner_bytes] = split_at(shape, axis_, x.dtype());
      const size_t piece = static_cast<size_t>(x.shape()[axis_]) * inner_bytes;
      for (int64_t o = 0; o < outer; ++o)
        std::memcpy(static_cast<char*>(p.raw_data()) +
                        static_cast<size_t>(o * shape[axis_] + begins_[k]) * inner_bytes,
                    static_cast<const char*>(x.raw_data()) + static_cast<size_t>(o) * piece, piece);
      padded.push_back(std::move(p));
    }
    std::vector<const Tensor*> inputs;
    for (const Tensor& p : padded) inputs.push_back(&p);
    std::vector<Tensor> outputs(1);
    KernelContext inner(sum_node_, ctx.execution(), inputs, outputs);
    sum_->compute(inner);
    ctx.set_output(0, std::move(outputs[0]));
  }

  Node sum_node_;
  std::unique_ptr<OpKernel> sum_;
  int64_t axis_;
  std::vector<int64_t> begins_, ends_;
};

DPRUN_REGISTER_KERNEL({.domain = kRewriteDomain,
                       .op_type = "PadSum",
                       .factory = make_kernel<PadSumKernel>});

}  // namespace
}  // namespace dprun
