// Gemm: Y = alpha * op(A) * op(B) + beta * C, C broadcast to [M, N] (the reference kernel).
#include <vector>

#include "engine/autograd/shape_rules.h"
#include "engine/kernel.h"
#include "engine/op_facts.h"
#include "ops/linalg/gemm_util.h"

namespace dprun {
namespace {

template <class T>
void gemm_ref(const ExecutionContext& exec, const GemmShapes& s, bool trans_a, bool trans_b,
              T alpha, T beta, const T* a, const T* b, const T* c, const Shape& c_shape, T* y) {
  const int64_t m = s.m, n = s.n, k = s.k;
  // C strides in the [M, N] frame (0 where it broadcasts).
  int64_t c_rs = 0, c_cs = 0;
  if (c) gemm_c_strides(c_shape, m, n, c_rs, c_cs);
  exec.parallel_for(m, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, k * n)),
                    [&](int64_t begin, int64_t end) {
                      std::vector<T> acc(static_cast<size_t>(n));
                      for (int64_t i = begin; i < end; ++i) {
                        std::fill(acc.begin(), acc.end(), T(0));
                        for (int64_t p = 0; p < k; ++p) {
                          const T av = trans_a ? a[p * m + i] : a[i * k + p];
                          if (trans_b)
                            for (int64_t j = 0; j < n; ++j)
                              acc[static_cast<size_t>(j)] += av * b[j * k + p];
                          else
                            for (int64_t j = 0; j < n; ++j)
                              acc[static_cast<size_t>(j)] += av * b[p * n + j];
                        }
                        for (int64_t j = 0; j < n; ++j) {
                          T v = alpha * acc[static_cast<size_t>(j)];
                          if (c) v += beta * c[i * c_rs + j * c_cs];
                          y[i * n + j] = v;
                        }
                      }
                    });
}

class GemmKernel : public OpKernel {
 public:
  explicit GemmKernel(const KernelInfo& info) : attrs_(info) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& a = ctx.input(0);
    const Tensor& b = ctx.input(1);
    const Tensor* c = ctx.optional_input(2);
    GemmShapes s = gemm_shapes(ctx, attrs_, a, b, c);
    Tensor& y = ctx.allocate_output(0, {s.m, s.n}, a.dtype());
    if (y.numel() == 0) return;
    auto run = [&](auto tag) {
      using T = decltype(tag);
      gemm_ref<T>(ctx.execution(), s, attrs_.trans_a, attrs_.trans_b, static_cast<T>(attrs_.alpha),
                  static_cast<T>(attrs_.beta), a.data<T>(), b.data<T>(), c ? c->data<T>() : nullptr,
                  c ? c->shape() : Shape{}, y.data<T>());
    };
    visit_dtype_among<float, double, int32_t, int64_t, uint32_t, uint64_t>(a.dtype(), run);
  }

 private:
  GemmAttrs attrs_;
};

const std::vector<DType> kGemmTypes = {DType::Float32, DType::Float64, DType::Int32,
                                       DType::Int64,   DType::UInt32,  DType::UInt64};

DPRUN_REGISTER_KERNEL(
    {.op_type = "Gemm", .since = 1, .dtypes = kGemmTypes, .factory = make_kernel<GemmKernel>});

}  // namespace
}  // namespace dprun

// The ops' facts (engine/op_facts.h): output types, shapes, 16-bit and layout policy.
namespace dprun {
namespace {

// [M, N]: M from A, N from B, each as transA/transB read them.
std::optional<SymbolicShape> gemm_shape(const ShapeQuery& q) {
  if (q.output != 0) return std::nullopt;
  auto a = q.input(0), b = q.input(1);
  if (auto c = q.constant(1)) b = from_dims(c->shape());
  SymbolicShape out = unknown_dims(2);
  if (a && a->size() == 2) out[0] = (*a)[q.node.attr_int("transA", 0) != 0 ? 1 : 0];
  if (b && b->size() == 2) out[1] = (*b)[q.node.attr_int("transB", 0) != 0 ? 0 : 1];
  return out;
}

DPRUN_REGISTER_OP_FACTS({.op_type = "Gemm", .shape_rule = gemm_shape});

}  // namespace
}  // namespace dprun
