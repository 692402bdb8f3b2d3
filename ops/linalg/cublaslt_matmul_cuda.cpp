#include "ops/linalg/cublaslt_matmul_cuda.h"

#include <cublasLt.h>

#include <algorithm>
#include <climits>
#include <cstdint>

#include "engine/backends/cuda/cuda_check.h"
#include "engine/env_flag.h"
#include "ops/linalg/cublas_gemm_cuda.h"

namespace dprun {

struct LtAlgorithm {
  /// False where cuBLASLt offers no algorithm for the key.
  bool found = false;
  cublasLtMatmulAlgo_t algo{};
  size_t workspace_bytes = 0;
};

namespace {

/// The most workspace a product's algorithm may ask for: what cuBLASLt's own guidance gives
/// Hopper, and from the caching allocator, so repeated products reuse it.
constexpr uint64_t kMaxWorkspaceBytes = uint64_t{32} << 20;

/// The largest power of two, up to 256, that divides the address: cuBLASLt's algorithms need
/// operands aligned to their vector width, and its heuristic offers only those whose needs
/// the given alignments meet.
uint32_t alignment_of(const void* p) {
  const auto address = reinterpret_cast<uintptr_t>(p);
  uint32_t align = 256;
  while (align > 1 && address % align != 0) align /= 2;
  return align;
}

class MatmulDesc {
 public:
  MatmulDesc(const LtProduct& p, bool relu, const void* bias) {
    // Every type sums in float32 with float32 alpha and beta; TF32 is float32's alone.
    const cublasComputeType_t compute =
        p.tf32 && p.dtype == DType::Float32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    cublas_check(cublasLtMatmulDescCreate(&desc_, compute, CUDA_R_32F), "cublasLtMatmulDescCreate");
    // Swapped operands (the header's note): cuBLASLt's A is our b, its B our a.
    set(CUBLASLT_MATMUL_DESC_TRANSA, static_cast<int32_t>(p.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N));
    set(CUBLASLT_MATMUL_DESC_TRANSB, static_cast<int32_t>(p.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N));
    set(CUBLASLT_MATMUL_DESC_EPILOGUE,
        static_cast<uint32_t>(relu ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_BIAS));
    set(CUBLASLT_MATMUL_DESC_BIAS_POINTER, static_cast<const void*>(bias));
  }
  ~MatmulDesc() { cublasLtMatmulDescDestroy(desc_); }
  MatmulDesc(const MatmulDesc&) = delete;
  MatmulDesc& operator=(const MatmulDesc&) = delete;
  operator cublasLtMatmulDesc_t() const { return desc_; }

 private:
  template <class T>
  void set(cublasLtMatmulDescAttributes_t attribute, const T& value) {
    cublas_check(cublasLtMatmulDescSetAttribute(desc_, attribute, &value, sizeof(value)),
                 "cublasLtMatmulDescSetAttribute ", static_cast<int>(attribute));
  }
  cublasLtMatmulDesc_t desc_ = nullptr;
};

/// A column-major matrix of `type` elements, `rows` x `cols`, with leading dimension `ld`.
class MatrixLayout {
 public:
  MatrixLayout(cudaDataType_t type, int64_t rows, int64_t cols, int64_t ld) {
    cublas_check(cublasLtMatrixLayoutCreate(&layout_, type, static_cast<uint64_t>(rows),
                                            static_cast<uint64_t>(cols), ld),
                 "cublasLtMatrixLayoutCreate of ", rows, " x ", cols);
  }
  ~MatrixLayout() { cublasLtMatrixLayoutDestroy(layout_); }
  MatrixLayout(const MatrixLayout&) = delete;
  MatrixLayout& operator=(const MatrixLayout&) = delete;
  operator cublasLtMatrixLayout_t() const { return layout_; }

 private:
  cublasLtMatrixLayout_t layout_ = nullptr;
};

class Preference {
 public:
  Preference(uint32_t align_a, uint32_t align_b, uint32_t align_d) {
    cublas_check(cublasLtMatmulPreferenceCreate(&pref_), "cublasLtMatmulPreferenceCreate");
    set(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, kMaxWorkspaceBytes);
    set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, align_a);
    set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, align_b);
    set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, align_d);
    set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, align_d);
  }
  ~Preference() { cublasLtMatmulPreferenceDestroy(pref_); }
  Preference(const Preference&) = delete;
  Preference& operator=(const Preference&) = delete;
  operator cublasLtMatmulPreference_t() const { return pref_; }

 private:
  template <class T>
  void set(cublasLtMatmulPreferenceAttributes_t attribute, const T& value) {
    cublas_check(cublasLtMatmulPreferenceSetAttribute(pref_, attribute, &value, sizeof(value)),
                 "cublasLtMatmulPreferenceSetAttribute ", static_cast<int>(attribute));
  }
  cublasLtMatmulPreference_t pref_ = nullptr;
};

}  // namespace

bool LtAlgorithms::run(CudaExecutionContext& cuda, const KernelContext& ctx, const LtProduct& p,
                       float alpha, const void* a, const void* b, const void* bias,
                       const CudaFusedActivation& activation, void* d) const {
  if (env_flag("DPRUN_NO_CUBLASLT")) return false;
  const int64_t m = cublas_int(p.m, ctx, "M"), n = cublas_int(p.n, ctx, "N"),
                k = cublas_int(p.k, ctx, "K");
  if (k == 0) ctx.fail("an empty sum has no product to run on cuBLASLt");
  // Column-major operands as stored: cuBLASLt's A is b ([n, k] read column-major, or [k, n]
  // when trans_b), its B is a, and D is d^T, n x m with leading dimension n.
  const cudaDataType_t type = cublas_type(p.dtype, ctx);
  const MatrixLayout a_layout(type, p.trans_b ? k : n, p.trans_b ? n : k, p.trans_b ? k : n);
  const MatrixLayout b_layout(type, p.trans_a ? m : k, p.trans_a ? k : m, p.trans_a ? m : k);
  const MatrixLayout d_layout(type, n, m, n);
  const bool relu = activation.kind == FusedActivationKind::Relu;  // in the epilogue
  const MatmulDesc desc(p, relu, bias);
  const uint32_t align_a = alignment_of(b), align_b = alignment_of(a), align_d = alignment_of(d),
                 align_bias = alignment_of(bias);
  // cuBLASLt documents no bias alignment its epilogues accept, and a bias that is a view into a
  // larger tensor may be 4-byte aligned: that goes the cuBLAS way, the bias added separately.
  if (align_bias < 16) return false;
  const ShapeCache<LtAlgorithm>::Key key = {m,
                                            n,
                                            k,
                                            p.trans_a,
                                            p.trans_b,
                                            p.tf32,
                                            relu,
                                            align_a,
                                            align_b,
                                            align_d,
                                            align_bias,
                                            ctx.device().index,
                                            static_cast<int64_t>(p.dtype)};
  const auto algorithm = cache_.get(key, [&] {
    const Preference pref(align_a, align_b, align_d);
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(
        cuda.cublas_lt(), desc, a_layout, b_layout, d_layout, d_layout, pref, 1, &result, &found);
    // NOT_SUPPORTED: no algorithm for this product and epilogue.
    if (status != CUBLAS_STATUS_NOT_SUPPORTED)
      cublas_check(status, "cublasLtMatmulAlgoGetHeuristic of [", m, ", ", k, "] x [", k, ", ", n,
                   "]");
    if (status != CUBLAS_STATUS_SUCCESS || found == 0) return std::make_shared<LtAlgorithm>();
    return std::make_shared<LtAlgorithm>(
        LtAlgorithm{.found = true, .algo = result.algo, .workspace_bytes = result.workspaceSize});
  });
  if (!algorithm->found) return false;
  Tensor workspace = algorithm->workspace_bytes == 0
                         ? Tensor()
                         : Tensor::empty({static_cast<int64_t>(algorithm->workspace_bytes)},
                                         DType::UInt8, ctx.device());
  const float beta = 0.f;  // D is written, not read: C is D and not added
  cublas_check(cublasLtMatmul(cuda.cublas_lt(), desc, &alpha, b, a_layout, a, b_layout, &beta, d,
                              d_layout, d, d_layout, &algorithm->algo,
                              workspace.defined() ? workspace.raw_data() : nullptr,
                              algorithm->workspace_bytes, cuda.stream()),
               "cublasLtMatmul of [", m, ", ", k, "] x [", k, ", ", n, "] with a bias epilogue");
  if (!relu) activation.apply(ctx, d, p.dtype, m * n);
  return true;
}

}  // namespace dprun
