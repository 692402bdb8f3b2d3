// Shape and Size: metadata of the input as int64 tensors.
#include "ops/cpu/data_movement.h"

namespace dprun {
namespace {

// Shape-15 adds start/end (clamped to [0, rank], negatives count from the end).
class ShapeKernel : public OpKernel {
 public:
  explicit ShapeKernel(const KernelInfo& info)
      : start_(info.node.attr_int("start", 0)),
        end_(info.node.has_attr("end") ? info.node.attr_int("end") : INT64_MAX) {}
  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    const int64_t r = x.rank();
    auto clamp = [r](int64_t v) {
      if (v < 0) v += r;
      return std::clamp<int64_t>(v, 0, r);
    };
    const int64_t start = clamp(start_), end = clamp(end_);
    const int64_t n = std::max<int64_t>(0, end - start);
    Tensor& y = ctx.allocate_output(0, {n}, DType::Int64);
    int64_t* out = y.data<int64_t>();
    for (int64_t i = 0; i < n; ++i) out[i] = x.shape()[static_cast<size_t>(start + i)];
  }

 private:
  int64_t start_, end_;
};

class SizeKernel : public OpKernel {
 public:
  explicit SizeKernel(const KernelInfo&) {}
  void compute(KernelContext& ctx) const override {
    Tensor& y = ctx.allocate_output(0, {}, DType::Int64);
    *y.data<int64_t>() = ctx.input(0).numel();
  }
};

DPRUN_REGISTER_KERNEL({.op_type = "Shape", .since = 1, .factory = make_kernel<ShapeKernel>});
DPRUN_REGISTER_KERNEL({.op_type = "Size", .since = 1, .factory = make_kernel<SizeKernel>});

}  // namespace
}  // namespace dprun
