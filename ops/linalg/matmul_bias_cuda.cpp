// The compute of the CUDA MatMulBias(A, B, bias) (defined in ops/linalg/matmul_bias_cuda_def.cpp),
// the op fusion's MatMul with its bias Add
// (engine/rewrites/op_fusion.h): A [..., K] times B [K, N] as one [M, K] x [K, N] product over
// A's rows, the bias added by cuBLASLt's epilogue while the product is written, then the fused
// activation (Relu in the epilogue too). Where cuBLASLt offers no algorithm, and for an empty
// sum, cuBLAS adds the product onto rows of bias written first. Float32, float16 or bfloat16, all
// three operands of one type; 16-bit sums are float32 and the product plus bias is rounded once,
// as on the CPU (an activation other than Relu rounds once more after it). Shapes and messages
// follow the CPU kernel (ops/linalg/fused_ops.cpp). A B of another rank than 2, which the fusion
// never writes, runs on the host (the definition declines it).
#include "engine/backends/cuda/cuda_execution_context.h"
#include "ops/cuda/defs/cuda_compute.h"
#include "ops/input_dtypes.h"
#include "ops/linalg/cublas_gemm_cuda.h"
#include "ops/linalg/cublaslt_matmul_cuda.h"
#include "ops/linalg/fused_epilogue_cuda.h"

namespace dprun {
namespace {

class MatMulBiasCuda : public OpKernel {
 public:
  explicit MatMulBiasCuda(const KernelInfo& info)
      : activation_(info.node), tf32_(info.plan_options.allow_tf32) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& a = ctx.input(0);
    const Tensor& b = ctx.input(1);
    const Tensor& bias = ctx.input(2);
    const DType dtype = a.dtype();
    if (dtype != DType::Float32 && !is_16bit_float(dtype))
      ctx.fail("expects float32, float16 or bfloat16 operands, got ", a.describe());
    check_one_dtype(ctx, "A, B and bias", 3);
    if (a.rank() < 1 || b.rank() != 2)
      ctx.fail("takes A of rank 1 or more and B of rank 2, got ", a.describe(), " and ",
               b.describe());
    const int64_t k = a.shape().back(), n = b.shape()[1];
    if (b.shape()[0] != k)
      ctx.fail("A ", shape_to_string(a.shape()), " and B ", shape_to_string(b.shape()),
               " do not multiply: ", k, " != ", b.shape()[0]);
    if (bias.rank() != 1 || bias.numel() != n)
      ctx.fail("bias has shape ", shape_to_string(bias.shape()), " but the product has ", n,
               " columns: it must be [", n, "]");
    Shape out_shape(a.shape().begin(), a.shape().end() - 1);
    out_shape.push_back(n);
    Tensor& y = ctx.allocate_output(0, out_shape, dtype);
    if (y.numel() == 0) return;
    const int64_t m = y.numel() / n;
    CudaExecutionContext& cuda = CudaExecutionContext::of(ctx.execution());
    if (k > 0 &&
        algorithms_.run(cuda, ctx, {.dtype = dtype, .tf32 = tf32_, .m = m, .n = n, .k = k}, 1.f,
                        a.raw_data(), b.raw_data(), bias.raw_data(), activation_, y.raw_data()))
      return;
    // The bias written into every row (all of an empty sum), cuBLAS adding the product onto it.
    write_bias_rows(ctx, bias.raw_data(), y.raw_data(), dtype, m, n);
    if (k > 0) {
      const RowMajorGemm gemm{
          .type = cublas_type(dtype, ctx), .tf32 = tf32_, .m = m, .n = n, .k = k};
      gemm.run(cuda.cublas(), ctx, 1.f, a.raw_data(), b.raw_data(), 1.f, y.raw_data());
    }
    activation_.apply(ctx, y.raw_data(), dtype, y.numel());
  }

 private:
  CudaFusedActivation activation_;
  bool tf32_;
  LtAlgorithms algorithms_;
};

DPRUN_CUDA_COMPUTE("dprun::MatMulBias", make_kernel<MatMulBiasCuda>);

}  // namespace
}  // namespace dprun
