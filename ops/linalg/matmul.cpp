// MatMul and MatMulInteger: numpy-style batched matrix products (the reference kernels).
#include <algorithm>
#include <vector>

#include "engine/autograd/shape_rules.h"
#include "engine/kernel.h"
#include "engine/op_facts.h"
#include "ops/linalg/matmul_util.h"

namespace dprun {
namespace {

/// c[b] = sum_k (a[b][m,k] - az[m]) * (b[b][k,n] - bz[n]) for every broadcast batch b.
/// Zero points are empty (none), one value, or one per row of a / column of b.
template <class TA, class TB, class TC>
void batched_matmul(const ExecutionContext& exec, const MatMulShapes& s, const TA* a, const TB* b,
                    TC* c, const std::vector<TC>& a_zero = {}, const std::vector<TC>& b_zero = {}) {
  const MatMulBatchIndex batch_index(s);
  const int64_t batches = shape_numel(s.batch), m = s.m, k = s.k, n = s.n;
  auto az = [&](int64_t i) {
    return a_zero.empty() ? TC(0) : a_zero[a_zero.size() == 1 ? 0 : static_cast<size_t>(i)];
  };
  auto bz = [&](int64_t j) {
    return b_zero.empty() ? TC(0) : b_zero[b_zero.size() == 1 ? 0 : static_cast<size_t>(j)];
  };
  // One task per (batch, row of the output).
  exec.parallel_for(batches * m, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, k * n)),
                    [&](int64_t begin, int64_t end) {
                      for (int64_t t = begin; t < end; ++t) {
                        const int64_t bi = t / m, i = t % m;
                        int64_t oa, ob;
                        batch_index(bi, oa, ob);
                        const TA* arow = a + (oa * m + i) * k;
                        const TB* bmat = b + ob * k * n;
                        TC* crow = c + (bi * m + i) * n;
                        for (int64_t j = 0; j < n; ++j) crow[j] = TC(0);
                        for (int64_t p = 0; p < k; ++p) {
                          const TC av = static_cast<TC>(arow[p]) - az(i);
                          const TB* brow = bmat + p * n;
                          for (int64_t j = 0; j < n; ++j)
                            crow[j] += av * (static_cast<TC>(brow[j]) - bz(j));
                        }
                      }
                    });
}

class MatMulKernel : public OpKernel {
 public:
  explicit MatMulKernel(const KernelInfo&) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& a = ctx.input(0);
    const Tensor& b = ctx.input(1);
    if (a.dtype() != b.dtype())
      ctx.fail("operand dtypes differ: ", a.describe(), " and ", b.describe());
    MatMulShapes s = matmul_shapes(ctx, a.shape(), b.shape());
    Tensor& y = ctx.allocate_output(0, s.out_shape, a.dtype());
    if (y.numel() == 0) return;
    auto run = [&](auto tag) {
      using T = decltype(tag);
      batched_matmul<T, T, T>(ctx.execution(), s, a.data<T>(), b.data<T>(), y.data<T>());
    };
    visit_dtype_among<float, double, int32_t, int64_t, uint32_t, uint64_t>(a.dtype(), run);
  }
};

/// MatMulInteger: uint8/int8 operands with zero points, int32 result.
class MatMulIntegerKernel : public OpKernel {
 public:
  explicit MatMulIntegerKernel(const KernelInfo&) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& a = ctx.input(0);
    const Tensor& b = ctx.input(1);
    const Tensor* az = ctx.optional_input(2);
    const Tensor* bz = ctx.optional_input(3);
    MatMulShapes s = matmul_shapes(ctx, a.shape(), b.shape());
    auto zero_points = [&](const Tensor* z, DType dt, int64_t count, const char* what) {
      std::vector<int32_t> out;
      if (!z) return out;
      if (z->dtype() != dt || (z->numel() != 1 && (z->rank() != 1 || z->dim(0) != count)))
        ctx.fail(what, " must be a scalar or [", count, "] of ", dtype_name(dt), ", got ",
                 z->describe());
      for (int64_t i = 0; i < z->numel(); ++i)
        out.push_back(static_cast<int32_t>(z->item_as_double(i)));
      return out;
    };
    std::vector<int32_t> a0 = zero_points(az, a.dtype(), s.m, "a_zero_point");
    std::vector<int32_t> b0 = zero_points(bz, b.dtype(), s.n, "b_zero_point");
    Tensor& y = ctx.allocate_output(0, s.out_shape, DType::Int32);
    if (y.numel() == 0) return;
    auto with_a = [&](auto atag) {
      using TA = decltype(atag);
      auto with_b = [&](auto btag) {
        using TB = decltype(btag);
        batched_matmul<TA, TB, int32_t>(ctx.execution(), s, a.data<TA>(), b.data<TB>(),
                                        y.data<int32_t>(), a0, b0);
      };
      if (b.dtype() == DType::UInt8)
        with_b(uint8_t{});
      else if (b.dtype() == DType::Int8)
        with_b(int8_t{});
      else
        ctx.fail("B must be uint8 or int8, got ", dtype_name(b.dtype()));
    };
    if (a.dtype() == DType::UInt8)
      with_a(uint8_t{});
    else if (a.dtype() == DType::Int8)
      with_a(int8_t{});
    else
      ctx.fail("A must be uint8 or int8, got ", dtype_name(a.dtype()));
  }
};

const std::vector<DType> kMatMulTypes = {DType::Float32, DType::Float64, DType::Int32,
                                         DType::Int64,   DType::UInt32,  DType::UInt64};

DPRUN_REGISTER_KERNEL({.op_type = "MatMul",
                       .since = 1,
                       .dtypes = kMatMulTypes,
                       .factory = make_kernel<MatMulKernel>});
DPRUN_REGISTER_KERNEL({.op_type = "MatMulInteger",
                       .since = 10,
                       .dtypes = {DType::UInt8, DType::Int8},
                       .factory = make_kernel<MatMulIntegerKernel>});

}  // namespace
}  // namespace dprun

// The ops' facts (engine/op_facts.h): output types, shapes, 16-bit and layout policy.
namespace dprun {
namespace {

// numpy matmul: the broadcast batch dims, then rows of A and columns of B (1-D operands
// promoted and their dim dropped again).
std::optional<SymbolicShape> matmul_shape(const ShapeQuery& q) {
  if (q.output != 0) return std::nullopt;
  auto a = q.input(0), b = q.input(1);
  if (!a || !b || a->empty() || b->empty()) return std::nullopt;
  bool a_vector = a->size() == 1, b_vector = b->size() == 1;
  SymbolicShape sa = *a, sb = *b;
  if (a_vector) sa.insert(sa.begin(), Dim::known(1));
  if (b_vector) sb.push_back(Dim::known(1));
  SymbolicShape batch_a(sa.begin(), sa.end() - 2), batch_b(sb.begin(), sb.end() - 2);
  auto batch = broadcast_symbolic(batch_a, batch_b);
  SymbolicShape out = batch ? *batch : unknown_dims(std::max(batch_a.size(), batch_b.size()));
  if (!a_vector) out.push_back(sa[sa.size() - 2]);
  if (!b_vector) out.push_back(sb.back());
  return out;
}

DPRUN_REGISTER_OP_FACTS({.op_type = "MatMul", .shape_rule = matmul_shape});
DPRUN_REGISTER_OP_FACTS({.op_type = "MatMulInteger",
                         .dtype = OutputDTypeRule::fixed(DType::Int32)});

}  // namespace
}  // namespace dprun
