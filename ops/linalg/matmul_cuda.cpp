// The compute of the CUDA MatMul (float32, float16, bfloat16; defined in
// ops/linalg/matmul_cuda_def.cpp) with cuBLAS: numpy semantics (matmul_util.h), 1-D
// operands promoted and batch dimensions broadcast.
//
// Batches go to cuBLAS in as few calls as their layout allows: when b has no batch dims and a
// is contiguous over the full batch, a's batches are one [batch * M, K] matrix (one GEMM);
// when each operand either has the full batch or none, one strided-batched call (stride 0 for
// the operand without batch dims); otherwise (batch dims broadcast against each other, e.g.
// [2, 1] with [1, 5]) one GEMM per output matrix.
#include <cuda_runtime_api.h>

#include "engine/backends/cuda/cuda_check.h"
#include "engine/backends/cuda/cuda_execution_context.h"
#include "ops/cuda/defs/cuda_compute.h"
#include "ops/input_dtypes.h"
#include "ops/linalg/cublas_gemm_cuda.h"
#include "ops/linalg/matmul_util.h"

namespace dprun {
namespace {

class MatMulCuda : public OpKernel {
 public:
  explicit MatMulCuda(const KernelInfo& info) : tf32_(info.plan_options.allow_tf32) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& a = ctx.input(0);
    const Tensor& b = ctx.input(1);
    check_one_dtype(ctx, "A and B", 2);
    const cudaDataType_t type = cublas_type(a.dtype(), ctx);
    const MatMulShapes s = matmul_shapes(ctx, a.shape(), b.shape());
    Tensor& y = ctx.allocate_output(0, s.out_shape, a.dtype());
    if (y.numel() == 0) return;
    CudaExecutionContext& cuda = CudaExecutionContext::of(ctx.execution());
    if (s.k == 0) {  // an empty sum: zeros
      cuda_check(cudaMemsetAsync(y.raw_data(), 0, y.nbytes(), cuda.stream()),
                 "MatMul: cudaMemsetAsync");
      return;
    }
    const Shape batch_a(s.a.begin(), s.a.end() - 2), batch_b(s.b.begin(), s.b.end() - 2);
    const int64_t batches = shape_numel(s.batch);
    const bool a_none = shape_numel(batch_a) == 1, b_none = shape_numel(batch_b) == 1;
    const bool a_full = batch_a == s.batch, b_full = batch_b == s.batch;
    const auto* pa = static_cast<const char*>(a.raw_data());
    const auto* pb = static_cast<const char*>(b.raw_data());
    auto* py = static_cast<char*>(y.raw_data());
    const int64_t bytes = static_cast<int64_t>(dtype_size(a.dtype()));
    RowMajorGemm gemm{.type = type, .tf32 = tf32_, .m = s.m, .n = s.n, .k = s.k};
    if (b_none && a_full) {
      gemm.m = batches * s.m;
      gemm.run(cuda.cublas(), ctx, 1.f, pa, pb, 0.f, py);
    } else if ((a_none || a_full) && (b_none || b_full)) {
      gemm.batch = batches;
      gemm.stride_a = a_none ? 0 : s.m * s.k;
      gemm.stride_b = b_none ? 0 : s.k * s.n;
      gemm.stride_c = s.m * s.n;
      gemm.run(cuda.cublas(), ctx, 1.f, pa, pb, 0.f, py);
    } else {
      const MatMulBatchIndex batch_index(s);
      for (int64_t bi = 0; bi < batches; ++bi) {
        int64_t oa, ob;
        batch_index(bi, oa, ob);
        gemm.run(cuda.cublas(), ctx, 1.f, pa + oa * s.m * s.k * bytes, pb + ob * s.k * s.n * bytes,
                 0.f, py + bi * s.m * s.n * bytes);
      }
    }
  }

 private:
  bool tf32_;
};

DPRUN_CUDA_COMPUTE("MatMul", make_kernel<MatMulCuda>);

}  // namespace
}  // namespace dprun
