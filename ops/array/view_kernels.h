#pragma once
// Kernels whose output is input 0 under a new shape, sharing its storage (Tensor::reshape):
// Reshape, Flatten, Squeeze, Unsqueeze and Identity. They never touch element data, so the
// same classes serve every device; shape and axes inputs are read on the host
// (IntInputReader: from the plan's copy of a constant, else copied from device memory).
#include <cstdint>
#include <vector>

#include "engine/kernel.h"
#include "ops/common/data_movement.h"

namespace dprun {

// Reshape-1..4 takes the target from the `shape` attribute; 5+ from input 1, with allowzero
// since 14 (absent attribute = 0 before that, identical semantics).
class ReshapeKernel : public OpKernel {
 public:
  explicit ReshapeKernel(const KernelInfo& info);
  void compute(KernelContext& ctx) const override;

 private:
  bool from_attr_;
  bool allowzero_ = false;
  std::vector<int64_t> shape_;
  IntInputReader read_;
};

class FlattenKernel : public OpKernel {
 public:
  explicit FlattenKernel(const KernelInfo& info) : axis_(info.node.attr_int("axis", 1)) {}
  void compute(KernelContext& ctx) const override;

 private:
  int64_t axis_;
};

// Squeeze/Unsqueeze: `axes` is an attribute before opset 13 and an input from 13.
class SqueezeKernel : public OpKernel {
 public:
  explicit SqueezeKernel(const KernelInfo& info);
  void compute(KernelContext& ctx) const override;

 private:
  bool from_attr_;
  bool has_axes_ = false;
  std::vector<int64_t> axes_;
  IntInputReader read_;
};

class UnsqueezeKernel : public OpKernel {
 public:
  explicit UnsqueezeKernel(const KernelInfo& info);
  void compute(KernelContext& ctx) const override;

 private:
  bool from_attr_;
  std::vector<int64_t> axes_;
  IntInputReader read_;
};

/// Identity: forwards its input without copying.
class IdentityKernel : public OpKernel {
 public:
  explicit IdentityKernel(const KernelInfo&) {}
  void compute(KernelContext& ctx) const override { ctx.set_output(0, ctx.input(0)); }
};

}  // namespace dprun
