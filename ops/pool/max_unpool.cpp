// MaxUnpool: scatters X into a zero tensor at the flat positions I (as produced by MaxPool's
// Indices output, flattened over the whole output tensor). The output shape is the optional
// output_shape input, else (in - 1) * stride - pad_begin - pad_end + kernel per spatial dim.
#include <vector>

#include "engine/op_facts.h"
#include "ops/common/conv_util.h"
#include "ops/common/reduce_common.h"

namespace dprun {
namespace {

class MaxUnpoolKernel : public OpKernel {
 public:
  explicit MaxUnpoolKernel(const KernelInfo& info) {
    kernel_ = info.node.attr_ints("kernel_shape");
    strides_ = info.node.attr_ints("strides", {});
    pads_ = info.node.attr_ints("pads", {});
    const size_t nd = kernel_.size();
    if (!strides_.empty() && strides_.size() != nd)
      info.node.fail("strides must have ", nd, " values");
    if (!pads_.empty() && pads_.size() != 2 * nd)
      info.node.fail("pads must have ", 2 * nd, " values");
    if (strides_.empty()) strides_.assign(nd, 1);
    if (pads_.empty()) pads_.assign(2 * nd, 0);
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    const Tensor& ind = ctx.input(1);
    const size_t nd = kernel_.size();
    if (x.rank() != static_cast<int64_t>(nd) + 2)
      ctx.fail("X ", shape_to_string(x.shape()), " must have ", nd, " spatial dims");
    if (ind.shape() != x.shape())
      ctx.fail("I ", shape_to_string(ind.shape()), " must have the shape of X ",
               shape_to_string(x.shape()));
    // Indices address the default output shape; an explicit output_shape only enlarges the
    // spatial extent, so each index is re-placed at the same coordinates in the larger tensor.
    Shape base{x.dim(0), x.dim(1)};
    for (size_t i = 0; i < nd; ++i)
      base.push_back((x.shape()[i + 2] - 1) * strides_[i] - pads_[i] - pads_[i + nd] + kernel_[i]);
    Shape out = base;
    if (const Tensor* os = ctx.optional_input(2)) {
      std::vector<int64_t> given = read_int_list(ctx, *os, "output_shape");
      if (given.size() != base.size())
        ctx.fail("output_shape must have ", base.size(), " values, got ", given.size());
      for (size_t i = 0; i < base.size(); ++i)
        if (given[i] < base[i] || (i < 2 && given[i] != base[i]))
          ctx.fail("output_shape ", shape_to_string(given), " is smaller than the unpooled shape ",
                   shape_to_string(base));
      out = given;
    }
    const std::vector<int64_t> idx = read_int_list(ctx, ind, "I");
    Tensor& y = ctx.allocate_output(0, out, x.dtype());
    const int64_t base_total = shape_numel(base);
    const size_t es = dtype_size(x.dtype());
    auto* dst = static_cast<unsigned char*>(y.raw_data());
    const auto* src = static_cast<const unsigned char*>(x.raw_data());
    std::fill(dst, dst + y.numel() * static_cast<int64_t>(es), static_cast<unsigned char>(0));
    for (size_t i = 0; i < idx.size(); ++i) {
      if (idx[i] < 0 || idx[i] >= base_total)
        ctx.fail("index ", idx[i], " is outside the unpooled output of ", base_total, " elements");
      int64_t rem = idx[i], flat = 0, stride = 1;
      for (size_t d = base.size(); d-- > 0;) {
        flat += (rem % base[d]) * stride;
        rem /= base[d];
        stride *= out[d];
      }
      std::copy(src + i * es, src + (i + 1) * es, dst + static_cast<size_t>(flat) * es);
    }
  }

 private:
  std::vector<int64_t> kernel_, strides_, pads_;
};

DPRUN_REGISTER_KERNEL({.op_type = "MaxUnpool",
                       .since = 9,
                       .factory = make_kernel<MaxUnpoolKernel>});

}  // namespace
}  // namespace dprun

// The ops' facts (engine/op_facts.h): output types, shapes, 16-bit and layout policy.
namespace dprun {
namespace {
DPRUN_REGISTER_OP_FACTS({.op_type = "MaxUnpool"});

}  // namespace
}  // namespace dprun
