// Linear quantization: QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear, QLinearMatMul,
// QLinearConv.
//
// q = saturate(round_half_even(x / scale) + zero_point);  x = (q - zero_point) * scale.
// Scales and zero points are per tensor (one value), per axis (1-D along `axis`, opset 13), or
// blocked (opset 21 `block_size`: same rank as x, dimension `axis` divided into blocks).
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "engine/op_facts.h"
#include "ops/common/broadcast.h"
#include "ops/common/conv_util.h"
#include "ops/common/reduce_common.h"
#include "ops/linalg/matmul_util.h"

namespace dprun {
namespace {

/// The quantized integer types and their ranges.
template <class F>
decltype(auto) visit_quant_dtype(const KernelContext& ctx, DType t, F&& f) {
  switch (t) {
    case DType::UInt8:
      return f(uint8_t{});
    case DType::Int8:
      return f(int8_t{});
    case DType::UInt16:
      return f(uint16_t{});
    case DType::Int16:
      return f(int16_t{});
    case DType::Int32:
      return f(int32_t{});
    default:
      ctx.fail("unsupported quantized dtype ", dtype_name(t));
  }
}

template <class Q>
Q saturate_round(double v) {
  v = std::nearbyint(v);
  v = std::clamp(v, static_cast<double>(std::numeric_limits<Q>::lowest()),
                 static_cast<double>(std::numeric_limits<Q>::max()));
  return static_cast<Q>(v);
}

/// Values of a float-like tensor as double.
std::vector<double> read_doubles(const KernelContext& ctx, const Tensor& t, const char* what) {
  std::vector<double> out(static_cast<size_t>(t.numel()));
  switch (t.dtype()) {
    case DType::Float32:
    case DType::Float64:
    case DType::Float16:
    case DType::BFloat16:
    case DType::Int32:
    case DType::Int8:
    case DType::UInt8:
    case DType::Int16:
    case DType::UInt16:
    case DType::Int64:
      for (int64_t i = 0; i < t.numel(); ++i) out[static_cast<size_t>(i)] = t.item_as_double(i);
      return out;
    default:
      ctx.fail(what, " has unsupported dtype ", dtype_name(t.dtype()));
  }
}

/// Maps a flat element index of x to the index of its scale/zero point.
struct QuantParamIndex {
  int64_t inner = 1, axis_dim = 1, block = 0, param_axis = 1;
  bool scalar = true;

  int64_t operator()(int64_t i) const {
    if (scalar) return 0;
    const int64_t a = (i / inner) % axis_dim;
    const int64_t o = i / (inner * axis_dim);
    if (block == 0) return a;
    return (o * param_axis + a / block) * inner + i % inner;
  }
};

QuantParamIndex quant_param_index(const KernelContext& ctx, const Shape& x, const Tensor& scale,
                                  int64_t axis, int64_t block_size) {
  QuantParamIndex idx;
  if (scale.numel() == 1 && block_size == 0 && scale.rank() <= 1) return idx;
  const int64_t rank = static_cast<int64_t>(x.size());
  if (axis < -rank || axis >= rank) ctx.fail("axis ", axis, " is out of range for rank ", rank);
  if (axis < 0) axis += rank;
  idx.scalar = false;
  idx.axis_dim = x[static_cast<size_t>(axis)];
  idx.inner = dims_product(x, axis + 1, rank);
  if (block_size > 0) {
    if (scale.rank() != rank)
      ctx.fail("blocked scale must have the rank of x, got ", shape_to_string(scale.shape()));
    idx.block = block_size;
    idx.param_axis = scale.dim(axis);
    for (int64_t d = 0; d < rank; ++d) {
      const int64_t want = d == axis ? (idx.axis_dim + block_size - 1) / block_size : x[d];
      if (scale.dim(d) != want)
        ctx.fail("blocked scale ", shape_to_string(scale.shape()), " does not match x ",
                 shape_to_string(x), " with block_size ", block_size);
    }
    return idx;
  }
  if (scale.rank() != 1 || scale.dim(0) != idx.axis_dim)
    ctx.fail("scale ", shape_to_string(scale.shape()), " must be a scalar or have ", idx.axis_dim,
             " values (dimension ", axis, " of x ", shape_to_string(x), ")");
  return idx;
}

class QuantizeLinearKernel : public OpKernel {
 public:
  explicit QuantizeLinearKernel(const KernelInfo& info) {
    axis_ = info.node.attr_int("axis", 1);
    block_size_ = info.node.attr_int("block_size", 0);
    if (block_size_ < 0) info.node.fail("block_size must be >= 0, got ", block_size_);
    if (info.node.has_attr("output_dtype")) output_dtype_ = info.node.attr_int("output_dtype");
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    const Tensor& scale = ctx.input(1);
    const Tensor* zp = ctx.optional_input(2);
    if (zp && zp->shape() != scale.shape())
      ctx.fail("zero point ", shape_to_string(zp->shape()), " and scale ",
               shape_to_string(scale.shape()), " shapes differ");
    QuantParamIndex idx = quant_param_index(ctx, x.shape(), scale, axis_, block_size_);
    DType out_t = zp              ? zp->dtype()
                  : output_dtype_ ? static_cast<DType>(output_dtype_)
                                  : DType::UInt8;
    if (zp && output_dtype_ && static_cast<DType>(output_dtype_) != zp->dtype())
      ctx.fail("output_dtype differs from the zero point dtype");
    const std::vector<double> xs = read_doubles(ctx, x, "x");
    const std::vector<double> sc = read_doubles(ctx, scale, "scale");
    const std::vector<double> zs =
        zp ? read_doubles(ctx, *zp, "zero point") : std::vector<double>(sc.size(), 0.0);
    const bool float_scale = scale.dtype() == DType::Float32;
    Tensor& y = ctx.allocate_output(0, x.shape(), out_t);
    visit_quant_dtype(ctx, out_t, [&](auto tag) {
      using Q = decltype(tag);
      Q* out = y.data<Q>();
      for (int64_t i = 0; i < x.numel(); ++i) {
        const size_t p = static_cast<size_t>(idx(i));
        // The division happens in the scale's precision, as the spec's reference does.
        double q = float_scale
                       ? static_cast<double>(static_cast<float>(xs[static_cast<size_t>(i)]) /
                                             static_cast<float>(sc[p]))
                       : xs[static_cast<size_t>(i)] / sc[p];
        out[i] = saturate_round<Q>(std::nearbyint(q) + zs[p]);
      }
    });
  }

 private:
  int64_t axis_ = 1, block_size_ = 0, output_dtype_ = 0;
};

class DequantizeLinearKernel : public OpKernel {
 public:
  explicit DequantizeLinearKernel(const KernelInfo& info) {
    axis_ = info.node.attr_int("axis", 1);
    block_size_ = info.node.attr_int("block_size", 0);
    if (block_size_ < 0) info.node.fail("block_size must be >= 0, got ", block_size_);
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    const Tensor& scale = ctx.input(1);
    const Tensor* zp = ctx.optional_input(2);
    if (zp && zp->shape() != scale.shape())
      ctx.fail("zero point ", shape_to_string(zp->shape()), " and scale ",
               shape_to_string(scale.shape()), " shapes differ");
    if (zp && zp->dtype() != x.dtype())
      ctx.fail("zero point dtype ", dtype_name(zp->dtype()), " differs from x dtype ",
               dtype_name(x.dtype()));
    QuantParamIndex idx = quant_param_index(ctx, x.shape(), scale, axis_, block_size_);
    const std::vector<double> sc = read_doubles(ctx, scale, "scale");
    const std::vector<double> zs =
        zp ? read_doubles(ctx, *zp, "zero point") : std::vector<double>(sc.size(), 0.0);
    visit_quant_dtype(ctx, x.dtype(), [](auto) {});
    const std::vector<double> xs = read_doubles(ctx, x, "x");
    Tensor& y = ctx.allocate_output(0, x.shape(), scale.dtype());
    visit_dtype(scale.dtype(), [&](auto tag) {
      using T = decltype(tag);
      if constexpr (std::is_floating_point_v<T> || is_half_v<T>) {
        T* out = y.data<T>();
        for (int64_t i = 0; i < x.numel(); ++i) {
          const size_t p = static_cast<size_t>(idx(i));
          using C = compute_t<T>;
          out[i] = store_as<T>(static_cast<C>(xs[static_cast<size_t>(i)] - zs[p]) *
                               static_cast<C>(sc[p]));
        }
      } else {
        ctx.fail("scale must be floating point, got ", dtype_name(scale.dtype()));
      }
    });
  }

 private:
  int64_t axis_ = 1, block_size_ = 0;
};

/// uint8 quantization with scale and zero point chosen from the data range (which always
/// includes 0).
class DynamicQuantizeLinearKernel : public OpKernel {
 public:
  explicit DynamicQuantizeLinearKernel(const KernelInfo&) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    if (x.dtype() != DType::Float32) ctx.fail("x must be float32, got ", dtype_name(x.dtype()));
    const float* xs = x.data<float>();
    float mn = 0, mx = 0;
    for (int64_t i = 0; i < x.numel(); ++i) {
      mn = std::min(mn, xs[i]);
      mx = std::max(mx, xs[i]);
    }
    const float scale = (mx - mn) / 255.f;
    uint8_t zp = 0;
    if (scale != 0) zp = saturate_round<uint8_t>(std::nearbyint(0.f - mn / scale));
    Tensor& y = ctx.allocate_output(0, x.shape(), DType::UInt8);
    uint8_t* out = y.data<uint8_t>();
    for (int64_t i = 0; i < x.numel(); ++i)
      out[i] =
          scale == 0
              ? zp
              : saturate_round<uint8_t>(std::nearbyint(xs[i] / scale) + static_cast<double>(zp));
    ctx.allocate_output(1, {}, DType::Float32).data<float>()[0] = scale;
    ctx.allocate_output(2, {}, DType::UInt8).data<uint8_t>()[0] = zp;
  }
};

/// Reads a scale or zero point that is one value or `n` values along one dimension.
std::vector<double> per_channel(const KernelContext& ctx, const Tensor* t, int64_t n,
                                const char* what, double fallback = 0) {
  if (!t) return std::vector<double>(static_cast<size_t>(n), fallback);
  std::vector<double> v = read_doubles(ctx, *t, what);
  if (v.size() == 1) return std::vector<double>(static_cast<size_t>(n), v[0]);
  if (static_cast<int64_t>(v.size()) != n)
    ctx.fail(what, " must have 1 or ", n, " values, got ", shape_to_string(t->shape()));
  return v;
}

/// Float multiplier a_scale * b_scale / y_scale computed in float32 like the spec's reference.
double requant_multiplier(double a, double b, double y) {
  return static_cast<double>(static_cast<float>(a) * static_cast<float>(b) / static_cast<float>(y));
}

class QLinearMatMulKernel : public OpKernel {
 public:
  explicit QLinearMatMulKernel(const KernelInfo&) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& a = ctx.input(0);
    const Tensor& b = ctx.input(3);
    const Tensor* yz = ctx.optional_input(7);
    MatMulShapes s = matmul_shapes(ctx, a.shape(), b.shape());
    // Scales/zero points: a per row (M) or scalar, b per column (N) or scalar, y scalar.
    const Tensor& as_t = ctx.input(1);
    const Tensor& bs_t = ctx.input(4);
    std::vector<double> a_s = per_channel(ctx, &as_t, as_t.numel() == 1 ? 1 : s.m, "a_scale");
    std::vector<double> a_z =
        per_channel(ctx, ctx.optional_input(2), static_cast<int64_t>(a_s.size()), "a_zero_point");
    std::vector<double> b_s = per_channel(ctx, &bs_t, bs_t.numel() == 1 ? 1 : s.n, "b_scale");
    std::vector<double> b_z =
        per_channel(ctx, ctx.optional_input(5), static_cast<int64_t>(b_s.size()), "b_zero_point");
    std::vector<double> y_s = per_channel(ctx, &ctx.input(6), 1, "y_scale");
    std::vector<double> y_z = per_channel(ctx, yz, 1, "y_zero_point");
    const std::vector<double> av = read_doubles(ctx, a, "a");
    const std::vector<double> bv = read_doubles(ctx, b, "b");
    const DType out_t = yz ? yz->dtype() : a.dtype();
    Tensor& y = ctx.allocate_output(0, s.out_shape, out_t);
    const size_t rank = s.a.size();
    Shape batch_a(s.a.begin(), s.a.end() - 2), batch_b(s.b.begin(), s.b.end() - 2);
    auto sa = broadcast_strides(batch_a, rank - 2), sb = broadcast_strides(batch_b, rank - 2);
    const int64_t batches = shape_numel(s.batch), m = s.m, k = s.k, n = s.n;
    visit_quant_dtype(ctx, out_t, [&](auto tag) {
      using Q = decltype(tag);
      Q* out = y.data<Q>();
      for (int64_t bi = 0; bi < batches; ++bi) {
        int64_t oa = 0, ob = 0, rest = bi;
        for (size_t d = rank - 2; d-- > 0;) {
          int64_t i = rest % s.batch[d];
          rest /= s.batch[d];
          oa += i * sa[d];
          ob += i * sb[d];
        }
        for (int64_t i = 0; i < m; ++i) {
          const size_t ai = a_s.size() == 1 ? 0 : static_cast<size_t>(i);
          for (int64_t j = 0; j < n; ++j) {
            const size_t bj = b_s.size() == 1 ? 0 : static_cast<size_t>(j);
            double acc = 0;
            for (int64_t p = 0; p < k; ++p)
              acc += (av[static_cast<size_t>((oa * m + i) * k + p)] - a_z[ai]) *
                     (bv[static_cast<size_t>((ob * k + p) * n + j)] - b_z[bj]);
            const double mult = requant_multiplier(a_s[ai], b_s[bj], y_s[0]);
            out[(bi * m + i) * n + j] = saturate_round<Q>(std::nearbyint(acc * mult) + y_z[0]);
          }
        }
      }
    });
  }
};

class QLinearConvKernel : public OpKernel {
 public:
  explicit QLinearConvKernel(const KernelInfo& info) {
    attrs_.parse(info.node);
    group_ = info.node.attr_int("group", 1);
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    const Tensor& w = ctx.input(3);
    const Tensor* yz = ctx.optional_input(7);
    const Tensor* bias = ctx.optional_input(8);
    if (x.rank() < 3 || w.rank() != x.rank())
      ctx.fail("x ", shape_to_string(x.shape()), " and w ", shape_to_string(w.shape()),
               " must have the same rank >= 3");
    const int64_t N = x.dim(0), C = x.dim(1), M = w.dim(0);
    if (group_ <= 0 || C != w.dim(1) * group_ || M % group_ != 0)
      ctx.fail("x ", shape_to_string(x.shape()), " and w ", shape_to_string(w.shape()),
               " do not agree for group=", group_);
    std::vector<int64_t> in(x.shape().begin() + 2, x.shape().end());
    std::vector<int64_t> kernel(w.shape().begin() + 2, w.shape().end());
    if (!attrs_.kernel_shape.empty() && attrs_.kernel_shape != kernel)
      ctx.fail("kernel_shape does not match w ", shape_to_string(w.shape()));
    WindowGeometry g = attrs_.resolve(ctx.node(), in, kernel);
    const std::vector<double> x_s = per_channel(ctx, &ctx.input(1), 1, "x_scale");
    const std::vector<double> x_z = per_channel(ctx, ctx.optional_input(2), 1, "x_zero_point");
    const std::vector<double> w_s = per_channel(ctx, &ctx.input(4), M, "w_scale");
    const std::vector<double> w_z = per_channel(ctx, ctx.optional_input(5), M, "w_zero_point");
    const std::vector<double> y_s = per_channel(ctx, &ctx.input(6), 1, "y_scale");
    const std::vector<double> y_z = per_channel(ctx, yz, 1, "y_zero_point");
    const std::vector<double> b = per_channel(ctx, bias, M, "B");
    const std::vector<double> xv = read_doubles(ctx, x, "x");
    const std::vector<double> wv = read_doubles(ctx, w, "w");
    Shape out_shape{N, M};
    for (int64_t o : g.out) out_shape.push_back(o);
    const DType out_t = yz ? yz->dtype() : x.dtype();
    Tensor& y = ctx.allocate_output(0, out_shape, out_t);
    const size_t nd = g.rank();
    const int64_t out_size = dims_product(out_shape, 2, static_cast<int64_t>(out_shape.size()));
    const int64_t in_size = dims_product(x.shape(), 2, x.rank());
    const int64_t k_size = dims_product(w.shape(), 2, w.rank());
    const int64_t cg = C / group_, mg = M / group_;
    visit_quant_dtype(ctx, out_t, [&](auto tag) {
      using Q = decltype(tag);
      Q* out = y.data<Q>();
      ctx.parallel_for(N * M, 1, [&](int64_t begin, int64_t end) {
        std::vector<int64_t> oi(nd), ki(nd);
        for (int64_t nm = begin; nm < end; ++nm) {
          const int64_t n = nm / M, m = nm % M, grp = m / mg;
          const double mult = requant_multiplier(x_s[0], w_s[static_cast<size_t>(m)], y_s[0]);
          for (int64_t o = 0; o < out_size; ++o) {
            int64_t rem = o;
            for (size_t d = nd; d-- > 0;) {
              oi[d] = rem % g.out[d];
              rem /= g.out[d];
            }
            double acc = 0;
            for (int64_t cc = 0; cc < cg; ++cc) {
              const int64_t c = grp * cg + cc;
              for (int64_t kk = 0; kk < k_size; ++kk) {
                int64_t krem = kk, off = 0;
                bool inside = true;
                for (size_t d = nd; d-- > 0;) {
                  ki[d] = krem % g.kernel[d];
                  krem /= g.kernel[d];
                }
                for (size_t d = 0; d < nd && inside; ++d) {
                  const int64_t pos =
                      oi[d] * g.strides[d] + ki[d] * g.dilations[d] - g.pads_begin[d];
                  if (pos < 0 || pos >= g.in[d]) inside = false;
                  off = off * g.in[d] + pos;
                }
                if (!inside) continue;
                acc += (xv[static_cast<size_t>((n * C + c) * in_size + off)] - x_z[0]) *
                       (wv[static_cast<size_t>((m * cg + cc) * k_size + kk)] -
                        w_z[static_cast<size_t>(m)]);
              }
            }
            acc += b[static_cast<size_t>(m)];
            out[nm * out_size + o] = saturate_round<Q>(std::nearbyint(acc * mult) + y_z[0]);
          }
        }
      });
    });
  }

 private:
  WindowAttrs attrs_;
  int64_t group_ = 1;
};

const std::vector<DType> kQuantizeInputs = {DType::Float32, DType::Float64, DType::Float16,
                                            DType::BFloat16, DType::Int32};
const std::vector<DType> kQuantTypes = {DType::UInt8, DType::Int8, DType::UInt16, DType::Int16,
                                        DType::Int32};

DPRUN_REGISTER_KERNEL({.op_type = "QuantizeLinear",
                       .since = 10,
                       .dtypes = kQuantizeInputs,
                       .factory = make_kernel<QuantizeLinearKernel>});
DPRUN_REGISTER_KERNEL({.op_type = "DequantizeLinear",
                       .since = 10,
                       .dtypes = kQuantTypes,
                       .factory = make_kernel<DequantizeLinearKernel>});
DPRUN_REGISTER_KERNEL({.op_type = "DynamicQuantizeLinear",
                       .since = 11,
                       .dtypes = {DType::Float32},
                       .factory = make_kernel<DynamicQuantizeLinearKernel>});
DPRUN_REGISTER_KERNEL({.op_type = "QLinearMatMul",
                       .since = 10,
                       .dtypes = {DType::UInt8, DType::Int8},
                       .factory = make_kernel<QLinearMatMulKernel>});
DPRUN_REGISTER_KERNEL({.op_type = "QLinearConv",
                       .since = 10,
                       .dtypes = {DType::UInt8, DType::Int8},
                       .factory = make_kernel<QLinearConvKernel>});

}  // namespace
}  // namespace dprun

// The ops' facts (engine/op_facts.h): output types, shapes, 16-bit and layout policy.
namespace dprun {
namespace {

// The zero point's type; uint8 without one (the schema's default).
std::optional<DType> quantize_linear_dtype(const Node& node, size_t,
                                           const InputDType& input_dtype) {
  if (node.inputs.size() < 3 || node.inputs[2].empty()) return DType::UInt8;
  return input_dtype(2);
}

// Kept in float32: its scale is float-only in the schema before opset 19.
DPRUN_REGISTER_OP_FACTS({.op_type = "DequantizeLinear",
                         .dtype = OutputDTypeRule::same_as_input(1),
                         .float32_only = true});
// Kept in float32: its input and scale are float-only in the schema.
DPRUN_REGISTER_OP_FACTS({.op_type = "DynamicQuantizeLinear", .float32_only = true});
DPRUN_REGISTER_OP_FACTS({.op_type = "QLinearConv"});
DPRUN_REGISTER_OP_FACTS({.op_type = "QLinearMatMul"});
// Kept in float32: its scale is float-only in the schema before opset 19.
DPRUN_REGISTER_OP_FACTS({.op_type = "QuantizeLinear",
                         .dtype_function = quantize_linear_dtype,
                         .float32_only = true});

}  // namespace
}  // namespace dprun
