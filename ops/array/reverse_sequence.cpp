// ReverseSequence: for each batch entry b, reverses the first sequence_lens[b] steps along the
// time axis. Batch and time are dims 0 and 1 (either order), so the remaining dims form one
// contiguous block per (batch, time) pair.
#include "engine/op_facts.h"
#include "ops/common/data_movement.h"

namespace dprun {
namespace {

class ReverseSequenceKernel : public OpKernel {
 public:
  explicit ReverseSequenceKernel(const KernelInfo& info)
      : batch_axis_(info.node.attr_int("batch_axis", 1)),
        time_axis_(info.node.attr_int("time_axis", 0)) {
    if (!((batch_axis_ == 0 && time_axis_ == 1) || (batch_axis_ == 1 && time_axis_ == 0)))
      info.node.fail("batch_axis and time_axis must be 0 and 1 in some order, got ", batch_axis_,
                     " and ", time_axis_);
  }
  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    if (x.rank() < 2) ctx.fail("input must have rank >= 2, got ", x.describe());
    const int64_t batch = x.shape()[static_cast<size_t>(batch_axis_)];
    const int64_t time = x.shape()[static_cast<size_t>(time_axis_)];
    const Tensor& lens_t = ctx.input(1);
    if (lens_t.rank() != 1 || lens_t.numel() != batch)
      ctx.fail("sequence_lens must be 1-D with ", batch, " entries, got ", lens_t.describe());
    const std::vector<int64_t> lens = read_int64_values(lens_t, ctx, "sequence_lens");
    for (int64_t l : lens)
      if (l < 0 || l > time) ctx.fail("sequence length ", l, " is out of range [0, ", time, "]");
    const int64_t inner = x.numel() / std::max<int64_t>(batch * time, 1);
    const size_t block = static_cast<size_t>(inner) * dtype_size(x.dtype());
    Tensor& y = ctx.allocate_output(0, x.shape(), x.dtype());
    const char* src = static_cast<const char*>(x.raw_data());
    char* dst = static_cast<char*>(y.raw_data());
    auto offset = [&](int64_t b, int64_t t) {
      return static_cast<size_t>(batch_axis_ == 0 ? b * time + t : t * batch + b) * block;
    };
    for (int64_t b = 0; b < batch; ++b) {
      const int64_t len = lens[static_cast<size_t>(b)];
      for (int64_t t = 0; t < time; ++t) {
        const int64_t from = t < len ? len - 1 - t : t;
        std::memcpy(dst + offset(b, t), src + offset(b, from), block);
      }
    }
  }

 private:
  int64_t batch_axis_, time_axis_;
};

DPRUN_REGISTER_KERNEL({.op_type = "ReverseSequence",
                       .since = 10,
                       .factory = make_kernel<ReverseSequenceKernel>});

}  // namespace
}  // namespace dprun

// The ops' facts (engine/op_facts.h): output types, shapes, 16-bit and layout policy.
namespace dprun {
namespace {
DPRUN_REGISTER_OP_FACTS({.op_type = "ReverseSequence", .shape = ShapeKind::SameAsInput0});

}  // namespace
}  // namespace dprun
