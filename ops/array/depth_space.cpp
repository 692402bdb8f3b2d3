// DepthToSpace and SpaceToDepth: a reshape, a 6-D permutation and a reshape back.
#include "engine/op_facts.h"
#include "ops/cpu/data_movement.h"

namespace dprun {
namespace {

class DepthToSpaceKernel : public OpKernel {
 public:
  explicit DepthToSpaceKernel(const KernelInfo& info)
      : block_(info.node.attr_int("blocksize")),
        crd_(info.node.attr_string("mode", "DCR") == "CRD") {
    const std::string mode = info.node.attr_string("mode", "DCR");
    if (mode != "DCR" && mode != "CRD") info.node.fail("mode must be DCR or CRD, got '", mode, "'");
    if (block_ <= 0) info.node.fail("blocksize must be positive, got ", block_);
  }
  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    if (x.rank() != 4) ctx.fail("input must be 4-D (N, C, H, W), got ", x.describe());
    const int64_t n = x.shape()[0], c = x.shape()[1], h = x.shape()[2], w = x.shape()[3];
    const int64_t b = block_;
    if (c % (b * b) != 0) ctx.fail("channels ", c, " are not divisible by blocksize^2 = ", b * b);
    const int64_t oc = c / (b * b);
    Shape view;
    std::vector<int64_t> perm;
    if (crd_) {
      view = {n, oc, b, b, h, w};
      perm = {0, 1, 4, 2, 5, 3};
    } else {
      view = {n, b, b, oc, h, w};
      perm = {0, 3, 4, 1, 5, 2};
    }
    Tensor& y = ctx.allocate_output(0, {n, oc, h * b, w * b}, x.dtype());
    permute_copy(ctx.execution(), x.raw_data(), view, perm, y.raw_data(), dtype_size(x.dtype()));
  }

 private:
  int64_t block_;
  bool crd_;
};

class SpaceToDepthKernel : public OpKernel {
 public:
  explicit SpaceToDepthKernel(const KernelInfo& info) : block_(info.node.attr_int("blocksize")) {
    if (block_ <= 0) info.node.fail("blocksize must be positive, got ", block_);
  }
  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    if (x.rank() != 4) ctx.fail("input must be 4-D (N, C, H, W), got ", x.describe());
    const int64_t n = x.shape()[0], c = x.shape()[1], h = x.shape()[2], w = x.shape()[3];
    const int64_t b = block_;
    if (h % b != 0 || w % b != 0)
      ctx.fail("spatial size ", h, "x", w, " is not divisible by blocksize ", b);
    Tensor& y = ctx.allocate_output(0, {n, c * b * b, h / b, w / b}, x.dtype());
    permute_copy(ctx.execution(), x.raw_data(), {n, c, h / b, b, w / b, b}, {0, 3, 5, 1, 2, 4},
                 y.raw_data(), dtype_size(x.dtype()));
  }

 private:
  int64_t block_;
};

DPRUN_REGISTER_KERNEL({.op_type = "DepthToSpace",
                       .since = 1,
                       .factory = make_kernel<DepthToSpaceKernel>});
DPRUN_REGISTER_KERNEL({.op_type = "SpaceToDepth",
                       .since = 1,
                       .factory = make_kernel<SpaceToDepthKernel>});

}  // namespace
}  // namespace dprun

// The ops' facts (engine/op_facts.h): output types, shapes, 16-bit and layout policy.
namespace dprun {
namespace {
DPRUN_REGISTER_OP_FACTS({.op_type = "DepthToSpace", .shape = ShapeKind::SameRank});
DPRUN_REGISTER_OP_FACTS({.op_type = "SpaceToDepth", .shape = ShapeKind::SameRank});

}  // namespace
}  // namespace dprun
