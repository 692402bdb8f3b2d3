// Reference kernels of the ops the CPU op fusion introduces (engine/rewrites/op_fusion.h),
// domain "dprun": MatMulBias(A, B, bias) = MatMul(A, B) + bias and FusedGemm = Gemm, each then
// its fused activation (ops/cpu/fused_activation.h), and FusedMatMul(A, B) = MatMul of A and B
// each transposed in its last two dims when transA or transB is 1, or by permA or permB (a
// Transpose folded into the product). The oneDNN MatMulBias and FusedGemm are in
// matmul_onednn.cpp; the fusion's Gelu is with the activations (ops/elementwise/activations.cpp).
#include <algorithm>
#include <numeric>
#include <utility>
#include <vector>

#include "engine/rewrites/rewrite_domain.h"
#include "ops/cpu/data_movement.h"
#include "ops/cpu/elementwise.h"
#include "ops/cpu/fused_activation.h"
#include "ops/cpu/plain_reference.h"

namespace dprun {
namespace {

/// Runs `kernel` for `plain` on the fused node's first inputs and returns its output 0.
Tensor run_plain(const OpKernel& kernel, const Node& plain, KernelContext& ctx) {
  std::vector<const Tensor*> inputs;
  for (size_t i = 0; i < plain.inputs.size(); ++i) inputs.push_back(ctx.optional_input(i));
  std::vector<Tensor> outputs(1);
  KernelContext inner(plain, ctx.execution(), inputs, outputs);
  kernel.compute(inner);
  return outputs[0];
}

/// MatMul's reference kernel, then the bias added to every row of the product, then the
/// activation.
class MatMulBiasKernel : public OpKernel {
 public:
  explicit MatMulBiasKernel(const KernelInfo& info)
      : kernel_(plain_reference(info, matmul_, "MatMul", 2)), activation_(info.node) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& bias = ctx.input(2);
    const Tensor product = run_plain(*kernel_, matmul_, ctx);
    const int64_t n = product.rank() > 0 ? product.shape().back() : 1;
    if (bias.dtype() != product.dtype())
      ctx.fail("bias is ", dtype_name(bias.dtype()), " but the product is ",
               dtype_name(product.dtype()));
    if (bias.rank() != 1 || bias.numel() != n)
      ctx.fail("bias has shape ", shape_to_string(bias.shape()), " but the product has shape ",
               shape_to_string(product.shape()), ": it must be [", n, "]");
    Tensor& y = ctx.allocate_output(0, product.shape(), product.dtype());
    visit_dtype_among<float, double>(y.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const T* p = product.data<T>();
      const T* b = bias.data<T>();
      T* out = y.data<T>();
      for (int64_t r = 0; r < y.numel() / std::max<int64_t>(n, 1); ++r)
        for (int64_t j = 0; j < n; ++j) out[r * n + j] = p[r * n + j] + b[j];
    });
    activation_.apply(y);
  }

 private:
  Node matmul_;
  std::unique_ptr<OpKernel> kernel_;
  FusedActivation activation_;
};

/// MatMul's reference kernel on the operands transposed as transA and transB (the last two dims
/// swapped) or permA and permB (Transpose's perm) say.
class FusedMatMulKernel : public OpKernel {
 public:
  explicit FusedMatMulKernel(const KernelInfo& info)
      : kernel_(plain_reference(info, matmul_, "MatMul", 2)),
        transposed_{info.node.attr_int("transA", 0) != 0, info.node.attr_int("transB", 0) != 0},
        perm_{info.node.attr_ints("permA", {}), info.node.attr_ints("permB", {})} {}

  void compute(KernelContext& ctx) const override {
    Tensor copies[2];
    std::vector<const Tensor*> operands;
    for (size_t i = 0; i < 2; ++i) {
      const Tensor& x = ctx.input(i);
      operands.push_back(&x);
      if (!transposed_[i] && perm_[i].empty()) continue;
      std::vector<int64_t> perm = perm_[i];
      if (perm.empty()) {
        if (x.rank() < 2)
          ctx.fail("input ", i, " is ", x.describe(), ": a transposed operand has rank >= 2");
        perm.resize(static_cast<size_t>(x.rank()));
        std::iota(perm.begin(), perm.end(), 0);
        std::swap(perm[perm.size() - 1], perm[perm.size() - 2]);
      }
      if (static_cast<int64_t>(perm.size()) != x.rank())
        ctx.fail("input ", i, " is ", x.describe(), ": its perm has ", perm.size(), " dims");
      Shape shape;
      for (int64_t d : perm) shape.push_back(x.shape()[static_cast<size_t>(d)]);
      copies[i] = Tensor::empty(shape, x.dtype());
      permute_copy(ctx.execution(), x.raw_data(), x.shape(), perm, copies[i].raw_data(),
                   dtype_size(x.dtype()));
      operands.back() = &copies[i];
    }
    std::vector<Tensor> outputs(1);
    KernelContext inner(matmul_, ctx.execution(), operands, outputs);
    kernel_->compute(inner);
    ctx.set_output(0, std::move(outputs[0]));
  }

 private:
  Node matmul_;
  std::unique_ptr<OpKernel> kernel_;
  bool transposed_[2];
  std::vector<int64_t> perm_[2];
};

/// Gemm's reference kernel, then the activation.
class FusedGemmKernel : public OpKernel {
 public:
  explicit FusedGemmKernel(const KernelInfo& info)
      : kernel_(plain_reference(info, gemm_, "Gemm", 3)), activation_(info.node) {}

  void compute(KernelContext& ctx) const override {
    const Tensor product = run_plain(*kernel_, gemm_, ctx);
    Tensor& y = ctx.allocate_output(0, product.shape(), product.dtype());
    y.copy_from(product);
    activation_.apply(y);
  }

 private:
  Node gemm_;
  std::unique_ptr<OpKernel> kernel_;
  FusedActivation activation_;
};

DPRUN_REGISTER_KERNEL({.domain = kRewriteDomain,
                       .op_type = "FusedMatMul",
                       .factory = make_kernel<FusedMatMulKernel>});
DPRUN_REGISTER_KERNEL({.domain = kRewriteDomain,
                       .op_type = "MatMulBias",
                       .dtypes = kFloatTypes,
                       .factory = make_kernel<MatMulBiasKernel>});
DPRUN_REGISTER_KERNEL({.domain = kRewriteDomain,
                       .op_type = "FusedGemm",
                       .dtypes = kFloatTypes,
                       .factory = make_kernel<FusedGemmKernel>});

}  // namespace
}  // namespace dprun
