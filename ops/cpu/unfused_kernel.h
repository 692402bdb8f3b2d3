#pragma once
// The reference kernel of a fused node of the CPU rewrites whose unfused form is a class that
// runs its parts' kernels in turn (ConcatThenConv, ConvThenAdd, ...): that class over the parts'
// reference kernels.
#include <string>

#include "engine/kernel.h"

namespace dprun {

/// `Unfused` is constructible from (const KernelInfo&, const std::string& impl) and has
/// compute(KernelContext&) const.
template <class Unfused>
class UnfusedReferenceKernel : public OpKernel {
 public:
  explicit UnfusedReferenceKernel(const KernelInfo& info) : unfused_(info, "reference") {}
  void compute(KernelContext& ctx) const override { unfused_.compute(ctx); }

 private:
  Unfused unfused_;
};

}  // namespace dprun
