// Reference kernels of the ops the CPU op fusion introduces (engine/backends/cpu/op_fusion.h),
// domain "dprun": MatMulBias(A, B, bias) = MatMul(A, B) + bias, and Gelu(x) in its erf form
// (math::GeluErfForm).
// The oneDNN MatMulBias is in matmul_onednn.cpp.
#include "engine/backends/cpu/layout_rewrite.h"
#include "ops/cpu/elementwise.h"
#include "ops/math/unary_functors.h"

namespace dprun {
namespace {

/// MatMul's reference kernel, then the bias added to every row of the product.
class MatMulBiasKernel : public OpKernel {
 public:
  explicit MatMulBiasKernel(const KernelInfo& info) : matmul_(info.node) {
    matmul_.op_type = "MatMul";
    matmul_.domain = "";
    matmul_.inputs.resize(2);
    KernelInfo plain{matmul_,   13, info.device_type, info.input_types, info.constant_inputs,
                     info.graph};
    plain.input_types.resize(2);
    std::string why;
    kernel_ = KernelRegistry::instance().create(plain, &why, "reference");
    if (!kernel_) info.node.fail("no MatMul reference kernel: ", why);
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& bias = ctx.input(2);
    std::vector<const Tensor*> inputs = {&ctx.input(0), &ctx.input(1)};
    std::vector<Tensor> outputs(1);
    KernelContext inner(matmul_, ctx.execution(), inputs, outputs);
    kernel_->compute(inner);
    const Tensor& product = outputs[0];
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
  }

 private:
  Node matmul_;
  std::unique_ptr<OpKernel> kernel_;
};

DPRUN_REGISTER_KERNEL({.domain = kLayoutDomain,
                       .op_type = "MatMulBias",
                       .dtypes = kFloatTypes,
                       .factory = make_kernel<MatMulBiasKernel>});
DPRUN_REGISTER_KERNEL(
    {.domain = kLayoutDomain,
     .op_type = "Gelu",
     .factory = make_kernel<ew::UnaryKernel<math::GeluErfForm, ew::Types::Float>>});

}  // namespace
}  // namespace dprun
