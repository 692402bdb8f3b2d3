// oneDNN fast paths for MatMul (batched, broadcasting) and Gemm, on the matmul primitive, in
// float32, bfloat16 and float16: oneDNN's 16-bit product, summed in float32
// and rounded once, where this CPU has one (bfloat16 on AVX-512 CPUs, natively with
// AVX512_BF16), else the float32 product of the widened operands, rounded once. Primitives are
// cached per operand shapes.
#include <cmath>
#include <cstring>
#include <numeric>
#include <optional>
#include <vector>

#include "engine/kernel.h"
#include "engine/rewrites/rewrite_domain.h"
#include "ops/cpu/fused_activation.h"
#include "ops/cpu/onednn_util.h"
#include "ops/cpu/packed_weights.h"
#include "ops/cpu/run_in_float32.h"
#include "ops/input_dtypes.h"
#include "ops/linalg/gemm_util.h"
#include "ops/linalg/matmul_util.h"

namespace dprun {
namespace {

using dnnl::memory;

struct MatMulPrimitive {
  bool usable = false;
  dnnl::matmul prim;
  memory::desc a_md, b_md, c_md, bias_md, scratchpad_md;
  memory::desc user_b_md;    // B's own memory; b_md is the layout the primitive reads
  bool prefill = false;      // Gemm: dst starts as beta*C and a sum post-op adds the product
  bool scaled_bias = false;  // Gemm: the bias is beta*C (materialised per call)
};

/// FusedMatMul's operand k (engine/rewrites/op_fusion.h): read as Transpose(input, perm) through
/// strides, perm from "permA"/"permB", or the last two dims swapped ("transA"/"transB"); none for
/// MatMul and MatMulBias.
struct OperandView {
  bool transposed = false;
  std::vector<int64_t> perm;  // empty: transposed swaps the last two dims

  OperandView(const Node& node, const char* trans, const char* permutation)
      : transposed(node.attr_int(trans, 0) != 0 || node.has_attr(permutation)),
        perm(node.has_attr(permutation) ? node.attr_ints(permutation) : std::vector<int64_t>{}) {}

  /// The logical dim d of an input of `rank` is stored dim order(rank)[d]; empty when perm does
  /// not fit the rank.
  std::vector<int64_t> order(size_t rank) const {
    std::vector<int64_t> o(rank);
    std::iota(o.begin(), o.end(), 0);
    if (!perm.empty()) return perm.size() == rank ? perm : std::vector<int64_t>{};
    if (transposed && rank >= 2) std::swap(o[rank - 1], o[rank - 2]);
    return rank >= 2 || !transposed ? o : std::vector<int64_t>{};
  }

  /// The operand's logical shape for a stored `shape`; nullopt where the view does not fit it.
  std::optional<Shape> logical(const Shape& shape) const {
    const std::vector<int64_t> o = order(shape.size());
    if (o.size() != shape.size()) return std::nullopt;
    Shape out;
    for (int64_t d : o) out.push_back(shape[static_cast<size_t>(d)]);
    return out;
  }

  /// The descriptor of the operand of logical shape `shape`, the logical shape of `stored` with
  /// leading 1s added or dropped: row-major, or strides into the stored tensor (no copy is made).
  memory::desc desc(const Shape& shape, const Shape& stored, memory::data_type type) const {
    if (!transposed) return onednn::plain_desc(shape, type);
    const memory::dims dense = onednn::dense_strides(stored);
    memory::dims strides;
    for (int64_t d : order(stored.size())) strides.push_back(dense[static_cast<size_t>(d)]);
    if (shape.size() < strides.size())
      strides.erase(strides.begin(), strides.end() - static_cast<std::ptrdiff_t>(shape.size()));
    else
      strides.insert(strides.begin(), shape.size() - strides.size(), dense[0] * stored[0]);
    return memory::desc(onednn::to_dims(shape), type, strides);
  }
};

class MatMulOnednnKernel : public OpKernel {
 public:
  /// MatMul, the fused MatMulBias (domain dprun) whose input 2 is a bias of B's last dim, added
  /// by oneDNN as it writes the product, or the fused FusedMatMul, whose transA and transB (or
  /// permA and permB) read an operand transposed through its strides.
  explicit MatMulOnednnKernel(const KernelInfo& info)
      : reference_(onednn::make_float32_reference(info)),
        weights_(info.constant_inputs.count(1) > 0),
        with_bias_(info.node.op_type == "MatMulBias"),
        views_{OperandView(info.node, "transA", "permA"),
               OperandView(info.node, "transB", "permB")},
        activation_(info.node) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& a = ctx.input(0);
    const Tensor& b = ctx.input(1);
    const Tensor* bias = with_bias_ ? &ctx.input(2) : nullptr;
    const bool half = is_16bit_float(a.dtype());
    if (half) {
      check_one_dtype(ctx, with_bias_ ? "A, B and the bias" : "A and B", with_bias_ ? 3 : 2);
    } else if (a.dtype() != DType::Float32 || b.dtype() != DType::Float32 ||
               (bias && (bias->dtype() != DType::Float32 || bias->rank() != 1))) {
      return reference_->compute(ctx);
    }
    const std::optional<Shape> a_shape = views_[0].logical(a.shape()),
                               b_shape = views_[1].logical(b.shape());
    if (!a_shape || !b_shape) return reference_->compute(ctx);
    MatMulShapes s = matmul_shapes(ctx, *a_shape, *b_shape);
    // The float32 path reports a bad bias and fills an empty product's bias.
    if (bias && (bias->rank() != 1 || bias->numel() != s.n || s.k == 0 || b.rank() != 2))
      return half ? run_in_float32(*this, ctx, a.dtype()) : reference_->compute(ctx);
    const double multiply_adds = static_cast<double>(shape_numel(s.batch)) * s.m * s.n * s.k;
    if (half && multiply_adds > 0) {
      // Made where it runs: oneDNN fixes a primitive's threads when it makes it (run_sized).
      // An activation applied after oneDNN (SiLU) works on float32 outputs only.
      bool usable = false;
      onednn::run_sized(ctx, multiply_adds, [&] { usable = primitive(s, a, b)->usable; });
      if (!usable || activation_.applied_after_onednn())
        return run_in_float32(*this, ctx, a.dtype());  // no 16-bit product here
    }
    Tensor& y = ctx.allocate_output(0, s.out_shape, a.dtype());
    if (y.numel() == 0) return;
    if (s.k == 0) {
      std::memset(y.raw_data(), 0, y.nbytes());  // +0 in every float type
      return;
    }
    onednn::run_sized(ctx, multiply_adds, [&] { run(ctx, s, a, b, bias, y); });
  }

 private:
  /// The primitive for these operands, from the cache of their dtype.
  std::shared_ptr<const MatMulPrimitive> primitive(const MatMulShapes& s, const Tensor& a,
                                                   const Tensor& b) const {
    const onednn::ShapeCache<MatMulPrimitive>& cache =
        is_16bit_float(a.dtype()) ? cache_16bit_ : cache_;
    return cache.get(onednn::shape_key({&a.shape(), &b.shape()}), [&] {
      return build(s, a.shape(), b.shape(), onednn::data_type_of(a.dtype()));
    });
  }

  /// The oneDNN path, on the threads run_sized gives it.
  void run(KernelContext& ctx, const MatMulShapes& s, const Tensor& a, const Tensor& b,
           const Tensor* bias, Tensor& y) const {
    auto p = primitive(s, a, b);
    if (!p->usable) return reference_->compute(ctx);  // float32 only: compute() saw to 16 bits
    const onednn::MemoryArg src{DNNL_ARG_SRC, &p->a_md, a.raw_data()};
    Tensor packed_b;  // B reordered for this call alone (weights being trained)
    const onednn::MemoryArg weights{DNNL_ARG_WEIGHTS, nullptr, nullptr,
                                    weights_.get(ctx, b, p->user_b_md, p->b_md, &packed_b)};
    const onednn::MemoryArg dst{DNNL_ARG_DST, &p->c_md, y.raw_data()};
    if (bias)
      onednn::execute_reusing(p->prim, p->scratchpad_md,
                              {src, weights, dst, {DNNL_ARG_BIAS, &p->bias_md, bias->raw_data()}});
    else
      onednn::execute_reusing(p->prim, p->scratchpad_md, {src, weights, dst});
    activation_.apply_after_onednn(ctx, y);
  }

  /// The primitive for the padded logical shapes `s` of operands stored as `a_stored` and
  /// `b_stored`.
  std::shared_ptr<const MatMulPrimitive> build(const MatMulShapes& s, const Shape& a_stored,
                                               const Shape& b_stored,
                                               memory::data_type type) const {
    auto p = std::make_shared<MatMulPrimitive>();
    const size_t rank = s.a.size();
    bool b_is_matrix = true;
    for (size_t i = 0; i + 2 < rank; ++i) b_is_matrix = b_is_matrix && s.b[i] == 1;
    Shape a_shape = s.a, b_shape = s.b, c_shape = s.batch;
    c_shape.push_back(s.m);
    c_shape.push_back(s.n);
    if (b_is_matrix && !views_[0].transposed) {  // a transposed A's rows are not contiguous
      // A shared right operand: one [batch*M, K] x [K, N] product, the fastest form.
      const int64_t rows = shape_numel(c_shape) / s.n;
      a_shape = {rows, s.k};
      b_shape = {s.k, s.n};
      c_shape = {rows, s.n};
    }
    if (a_shape.size() > DNNL_MAX_NDIMS) return p;
    try {
      p->a_md = views_[0].desc(a_shape, a_stored, type);
      p->user_b_md = views_[1].desc(b_shape, b_stored, type);
      p->c_md = onednn::plain_desc(c_shape, type);
      // A constant matrix B is packed once into the layout oneDNN prefers (PackedWeights).
      const memory::desc b_md = b_is_matrix ? packable(p->user_b_md) : p->user_b_md;
      if (with_bias_) {  // compute() checked that B is a matrix
        Shape bias_shape(c_shape.size(), 1);
        bias_shape.back() = s.n;
        p->bias_md = onednn::plain_desc(bias_shape, type);
      }
      dnnl::matmul::desc desc = with_bias_ ? dnnl::matmul::desc(p->a_md, b_md, p->bias_md, p->c_md)
                                           : dnnl::matmul::desc(p->a_md, b_md, p->c_md);
      dnnl::primitive_attr attr = onednn::concurrent_attr();
      attr.set_post_ops(activation_.post_ops());
      dnnl::matmul::primitive_desc pd(desc, attr, onednn::cpu_engine());
      p->b_md = pd.weights_desc();
      p->scratchpad_md = pd.scratchpad_desc();
      p->prim = dnnl::matmul(pd);
      p->usable = true;
    } catch (const dnnl::error&) {
      p->usable = false;
    }
    return p;
  }

  /// `user` when B is not a constant input, else the same dims in the layout oneDNN picks.
  memory::desc packable(const memory::desc& user) const {
    return weights_.constant()
               ? memory::desc(user.dims(), user.data_type(), memory::format_tag::any)
               : user;
  }

  std::unique_ptr<OpKernel> reference_;
  onednn::ShapeCache<MatMulPrimitive> cache_;
  onednn::ShapeCache<MatMulPrimitive> cache_16bit_;  // apart: shape keys do not name dtypes
  onednn::PackedWeights weights_;
  bool with_bias_;
  OperandView views_[2];        // FusedMatMul's transposed operands
  FusedActivation activation_;  // MatMulBias's, from the op fusion
};

class GemmOnednnKernel : public OpKernel {
 public:
  explicit GemmOnednnKernel(const KernelInfo& info)
      : reference_(onednn::make_float32_reference(info)),
        attrs_(info),
        weights_(info.constant_inputs.count(1) > 0),
        activation_(info.node) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& a = ctx.input(0);
    const Tensor& b = ctx.input(1);
    const Tensor* c = ctx.optional_input(2);
    if (is_16bit_float(a.dtype())) {
      check_one_dtype(ctx, "A, B and C", 3);
    } else if (a.dtype() != DType::Float32 || b.dtype() != DType::Float32 ||
               (c && c->dtype() != DType::Float32)) {
      return reference_->compute(ctx);
    }
    GemmShapes s = gemm_shapes(ctx, attrs_, a, b, c);
    if (attrs_.beta == 0.f) c = nullptr;
    const double multiply_adds = static_cast<double>(s.m) * s.n * s.k;
    if (is_16bit_float(a.dtype())) {
      // oneDNN's 16-bit product takes C only as a bias added whole, and activations only as
      // post-ops; the rest runs in float32.
      bool usable = multiply_adds > 0 && std::isfinite(attrs_.alpha) &&
                    (!c || (attrs_.alpha == 1.f && attrs_.beta == 1.f)) &&
                    !activation_.applied_after_onednn();
      // Made where it runs: oneDNN fixes a primitive's threads when it makes it (run_sized).
      if (usable)
        onednn::run_sized(ctx, multiply_adds, [&] { usable = primitive(s, a, b, c)->usable; });
      if (!usable) return run_in_float32(*this, ctx, a.dtype());
    }
    Tensor& y = ctx.allocate_output(0, {s.m, s.n}, a.dtype());
    if (y.numel() == 0) return;
    if (s.k == 0 || !std::isfinite(attrs_.alpha)) return reference_->compute(ctx);
    onednn::run_sized(ctx, multiply_adds, [&] { run(ctx, s, a, b, c, y); });
  }

 private:
  /// The oneDNN path, on the threads run_sized gives it.
  void run(KernelContext& ctx, const GemmShapes& s, const Tensor& a, const Tensor& b,
           const Tensor* c, Tensor& y) const {
    auto p = primitive(s, a, b, c);
    if (!p->usable) return reference_->compute(ctx);  // float32 only: compute() saw to 16 bits
    const onednn::MemoryArg src{DNNL_ARG_SRC, &p->a_md, a.raw_data()};
    Tensor packed_b;  // B reordered for this call alone (weights being trained)
    const onednn::MemoryArg weights{DNNL_ARG_WEIGHTS, nullptr, nullptr,
                                    weights_.get(ctx, b, p->user_b_md, p->b_md, &packed_b)};
    const onednn::MemoryArg dst{DNNL_ARG_DST, &p->c_md, y.raw_data()};
    std::vector<float> scaled;
    if (c && p->prefill) {
      int64_t rs = 0, cs = 0;
      gemm_c_strides(c->shape(), s.m, s.n, rs, cs);
      const float* cp = c->data<float>();
      float* yp = y.data<float>();
      for (int64_t i = 0; i < s.m; ++i)
        for (int64_t j = 0; j < s.n; ++j) yp[i * s.n + j] = attrs_.beta * cp[i * rs + j * cs];
    } else if (c) {
      const void* cp = c->raw_data();
      if (p->scaled_bias) {  // float32 only
        scaled.assign(c->data<float>(), c->data<float>() + c->numel());
        for (float& v : scaled) v *= attrs_.beta;
        cp = scaled.data();
      }
      onednn::execute_reusing(p->prim, p->scratchpad_md,
                              {src, weights, dst, {DNNL_ARG_BIAS, &p->bias_md, cp}});
      return activation_.apply_after_onednn(ctx, y);
    }
    onednn::execute_reusing(p->prim, p->scratchpad_md, {src, weights, dst});
    activation_.apply_after_onednn(ctx, y);
  }

  /// The primitive for these operands, from the cache of their dtype.
  std::shared_ptr<const MatMulPrimitive> primitive(const GemmShapes& s, const Tensor& a,
                                                   const Tensor& b, const Tensor* c) const {
    const onednn::ShapeCache<MatMulPrimitive>& cache =
        is_16bit_float(a.dtype()) ? cache_16bit_ : cache_;
    return cache.get(onednn::shape_key({&a.shape(), &b.shape(), c ? &c->shape() : nullptr}),
                     [&] { return build(s, c, onednn::data_type_of(a.dtype())); });
  }

  std::shared_ptr<const MatMulPrimitive> build(const GemmShapes& s, const Tensor* c,
                                               memory::data_type type) const {
    auto p = std::make_shared<MatMulPrimitive>();
    const int64_t m = s.m, k = s.k, n = s.n;
    try {
      // Transposed operands are described by their strides; no copy is made.
      p->a_md =
          memory::desc({m, k}, type, attrs_.trans_a ? memory::dims{1, m} : memory::dims{k, 1});
      p->user_b_md =
          memory::desc({k, n}, type, attrs_.trans_b ? memory::dims{1, k} : memory::dims{n, 1});
      // A constant B is packed once into the layout oneDNN prefers (PackedWeights).
      const memory::desc b_md =
          weights_.constant() ? memory::desc({k, n}, type, memory::format_tag::any) : p->user_b_md;
      p->c_md = onednn::plain_desc({m, n}, type);
      dnnl::primitive_attr attr = onednn::concurrent_attr();
      if (attrs_.alpha != 1.f) attr.set_output_scales(0, {attrs_.alpha});
      memory::desc bias_md;
      if (c) {
        if (attrs_.alpha == 1.f) {
          // C as a broadcast bias, viewed as [M or 1, N or 1].
          int64_t rs = 0, cs = 0;
          gemm_c_strides(c->shape(), m, n, rs, cs);
          Shape bshape{rs != 0 ? m : 1, cs != 0 ? n : 1};
          p->bias_md = onednn::plain_desc(bshape, type);
          bias_md = p->bias_md;
          p->scaled_bias = attrs_.beta != 1.f;
        } else {
          p->prefill = true;
        }
      }
      dnnl::post_ops ops;
      if (p->prefill) ops.append_sum(1.f);
      activation_.append_to(ops);  // FusedGemm's, after the sum
      if (ops.len() > 0) attr.set_post_ops(ops);
      dnnl::matmul::desc desc = c && !p->prefill
                                    ? dnnl::matmul::desc(p->a_md, b_md, bias_md, p->c_md)
                                    : dnnl::matmul::desc(p->a_md, b_md, p->c_md);
      dnnl::matmul::primitive_desc pd(desc, attr, onednn::cpu_engine());
      p->b_md = pd.weights_desc();
      p->scratchpad_md = pd.scratchpad_desc();
      p->prim = dnnl::matmul(pd);
      p->usable = true;
    } catch (const dnnl::error&) {
      p->usable = false;
    }
    return p;
  }

  std::unique_ptr<OpKernel> reference_;
  GemmAttrs attrs_;
  onednn::ShapeCache<MatMulPrimitive> cache_;
  onednn::ShapeCache<MatMulPrimitive> cache_16bit_;  // apart: shape keys do not name dtypes
  onednn::PackedWeights weights_;
  FusedActivation activation_;  // FusedGemm's, from the op fusion
};

DPRUN_REGISTER_KERNEL({.op_type = "MatMul",
                       .since = 1,
                       .dtypes = {DType::Float32, DType::BFloat16, DType::Float16},
                       .priority = 10,
                       .impl = "onednn",
                       .factory = make_kernel<MatMulOnednnKernel>});
DPRUN_REGISTER_KERNEL({.domain = kRewriteDomain,
                       .op_type = "MatMulBias",
                       .dtypes = {DType::Float32, DType::BFloat16, DType::Float16},
                       .priority = 10,
                       .impl = "onednn",
                       .factory = make_kernel<MatMulOnednnKernel>});
DPRUN_REGISTER_KERNEL({.domain = kRewriteDomain,
                       .op_type = "FusedMatMul",
                       .dtypes = {DType::Float32, DType::BFloat16, DType::Float16},
                       .priority = 10,
                       .impl = "onednn",
                       .factory = make_kernel<MatMulOnednnKernel>});
DPRUN_REGISTER_KERNEL({.domain = kRewriteDomain,
                       .op_type = "FusedGemm",
                       .dtypes = {DType::Float32, DType::BFloat16, DType::Float16},
                       .priority = 10,
                       .impl = "onednn",
                       .factory = make_kernel<GemmOnednnKernel>});
DPRUN_REGISTER_KERNEL({.op_type = "Gemm",
                       .since = 1,
                       .dtypes = {DType::Float32, DType::BFloat16, DType::Float16},
                       .priority = 10,
                       .impl = "onednn",
                       .factory = make_kernel<GemmOnednnKernel>});

}  // namespace
}  // namespace dprun
