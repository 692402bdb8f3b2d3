// Reduce{Sum,Mean,Max,Min,Prod,L1,L2,LogSum,LogSumExp,SumSquare}.
//
// Axes come from the `axes` attribute before opset 13 (ReduceSum) / 18 (the others) and from
// the optional second input afterwards, where an empty list means "all axes" unless
// noop_with_empty_axes is set. Reducing an empty set yields the reduction's identity (0 for
// sums, 1 for Prod, -inf/+inf for Max/Min, log(0) for the log reductions).
//
// Adjacent dimensions that are both kept or both reduced are merged first; the common layouts
// then have contiguous fast paths: [kept, reduced] reduces contiguous rows, [kept, reduced,
// kept] accumulates contiguous inner rows. Everything else walks precomputed offsets.
#include <cmath>
#include <limits>
#include <string>

#include "engine/op_facts.h"
#include "ops/reduce/reduce_axes.h"

namespace dprun {
namespace {

/// The reduction's iteration layout after merging dimensions.
struct Layout {
  enum class Kind { Rows, Middle, General } kind = Kind::Rows;
  int64_t outer = 1, reduced = 1, inner = 1;  // Rows: inner == 1
  int64_t out_numel = 1;
  // General: sizes and input strides of the kept dims (outermost first), and the input
  // offsets of every reduced element relative to an output's base.
  std::vector<int64_t> kept_sizes, kept_strides, reduced_offsets;
};

Layout make_layout(const Shape& shape, const std::vector<bool>& reduce_dim) {
  struct Group {
    int64_t size;
    bool reduced;
  };
  // Keep each dim's stride so the general path can address merged groups.
  std::vector<int64_t> strides(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;) strides[i - 1] = strides[i] * shape[i];
  std::vector<Group> groups;
  std::vector<int64_t> group_stride;  // stride of each group's innermost dim
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 1) continue;
    if (!groups.empty() && groups.back().reduced == reduce_dim[i]) {
      groups.back().size *= shape[i];
      group_stride.back() = strides[i];
    } else {
      groups.push_back({shape[i], reduce_dim[i]});
      group_stride.push_back(strides[i]);
    }
  }
  Layout L;
  int64_t reduced_total = 1;
  for (const auto& g : groups) {
    if (g.reduced)
      reduced_total *= g.size;
    else
      L.out_numel *= g.size;
  }
  L.reduced = reduced_total;
  const size_t n = groups.size();
  if (n == 0) return L;  // every dim has size 1: one element per output
  if (n == 1) {
    if (groups[0].reduced) return L;  // Rows with outer 1
    L.outer = groups[0].size;         // nothing reduced
    return L;
  }
  if (n == 2 && !groups[0].reduced) {
    L.outer = groups[0].size;
    return L;
  }
  if (n == 2 || (n == 3 && !groups[0].reduced)) {
    L.kind = Layout::Kind::Middle;
    L.outer = n == 3 ? groups[0].size : 1;
    L.inner = groups[n - 1].size;
    return L;
  }
  L.kind = Layout::Kind::General;
  // Offsets of reduced elements: odometer over the reduced groups.
  std::vector<int64_t> rsizes, rstrides;
  for (size_t g = 0; g < n; ++g) {
    if (groups[g].reduced) {
      rsizes.push_back(groups[g].size);
      rstrides.push_back(group_stride[g]);
    } else {
      L.kept_sizes.push_back(groups[g].size);
      L.kept_strides.push_back(group_stride[g]);
    }
  }
  L.reduced_offsets.reserve(static_cast<size_t>(reduced_total));
  std::vector<int64_t> idx(rsizes.size(), 0);
  for (int64_t r = 0; r < reduced_total; ++r) {
    int64_t off = 0;
    for (size_t d = 0; d < rsizes.size(); ++d) off += idx[d] * rstrides[d];
    L.reduced_offsets.push_back(off);
    for (size_t d = rsizes.size(); d-- > 0;) {
      if (++idx[d] < rsizes[d]) break;
      idx[d] = 0;
    }
  }
  return L;
}

template <ReduceOp Op, class T, class A>
void reduce_impl(const ExecutionContext& exec, const T* x, T* y, const Layout& L, const A* shift,
                 A* y_acc) {
  using R = Reducer<Op, A>;
  auto sh = [&](int64_t j) { return shift ? shift[j] : A(0); };
  auto put = [&](int64_t j, A v) {
    if (y_acc)
      y_acc[j] = v;
    else
      y[j] = store_as<T>(v);
  };
  const int64_t red = L.reduced;
  if (L.kind == Layout::Kind::Rows) {
    exec.parallel_for(L.outer, std::max<int64_t>(1, 16384 / std::max<int64_t>(red, 1)),
                      [&](int64_t begin, int64_t end) {
                        for (int64_t j = begin; j < end; ++j) {
                          const T* row = x + j * red;
                          const A s = sh(j);
                          // Eight independent accumulators let the compiler vectorize.
                          A acc[8];
                          for (auto& a : acc) a = R::init();
                          int64_t r = 0;
                          for (; r + 8 <= red; r += 8)
                            for (int k = 0; k < 8; ++k)
                              acc[k] = R::combine(acc[k], R::map(load_as<A>(row[r + k]), s));
                          for (; r < red; ++r)
                            acc[0] = R::combine(acc[0], R::map(load_as<A>(row[r]), s));
                          A total = acc[0];
                          for (int k = 1; k < 8; ++k) total = R::combine(total, acc[k]);
                          put(j, R::finalize(total, red, s));
                        }
                      });
  } else if (L.kind == Layout::Kind::Middle) {
    constexpr int64_t kBlock = 512;
    const int64_t inner = L.inner;
    const int64_t blocks = (inner + kBlock - 1) / kBlock;
    exec.parallel_for(
        L.outer * blocks,
        std::max<int64_t>(1, 16384 / std::max<int64_t>(red * std::min(kBlock, inner), 1)),
        [&](int64_t begin, int64_t end) {
          std::vector<A> acc(static_cast<size_t>(std::min(kBlock, inner)));
          for (int64_t t = begin; t < end; ++t) {
            const int64_t o = t / blocks;
            const int64_t i0 = (t % blocks) * kBlock;
            const int64_t len = std::min(kBlock, inner - i0);
            const int64_t out0 = o * inner + i0;
            std::fill(acc.begin(), acc.begin() + len, R::init());
            for (int64_t r = 0; r < red; ++r) {
              const T* p = x + (o * red + r) * inner + i0;
              for (int64_t i = 0; i < len; ++i)
                acc[i] = R::combine(acc[i], R::map(load_as<A>(p[i]), sh(out0 + i)));
            }
            for (int64_t i = 0; i < len; ++i) put(out0 + i, R::finalize(acc[i], red, sh(out0 + i)));
          }
        });
  } else {
    const size_t kr = L.kept_sizes.size();
    exec.parallel_for(L.out_numel, std::max<int64_t>(1, 16384 / std::max<int64_t>(red, 1)),
                      [&](int64_t begin, int64_t end) {
                        for (int64_t j = begin; j < end; ++j) {
                          int64_t rest = j, base = 0;
                          for (size_t d = kr; d-- > 0;) {
                            base += (rest % L.kept_sizes[d]) * L.kept_strides[d];
                            rest /= L.kept_sizes[d];
                          }
                          const A s = sh(j);
                          A acc = R::init();
                          for (int64_t off : L.reduced_offsets)
                            acc = R::combine(acc, R::map(load_as<A>(x[base + off]), s));
                          put(j, R::finalize(acc, red, s));
                        }
                      });
  }
}

template <ReduceOp Op, class T>
void run_reduce(const ExecutionContext& exec, const T* x, T* y, const Layout& L) {
  using A = acc_type_t<Op, T>;
  if constexpr (Op == ReduceOp::LogSumExp) {
    // Subtract each output's maximum so exp cannot overflow; non-finite maxima (all -inf,
    // +inf, NaN, empty sets) are left unshifted so inf/NaN propagate as in the plain formula.
    std::vector<A> shift(static_cast<size_t>(L.out_numel));
    reduce_impl<ReduceOp::Max, T, A>(exec, x, nullptr, L, nullptr, shift.data());
    for (auto& s : shift)
      if (!std::isfinite(s)) s = A(0);
    reduce_impl<Op, T, A>(exec, x, y, L, shift.data(), nullptr);
  } else {
    reduce_impl<Op, T, A>(exec, x, y, L, nullptr, nullptr);
  }
}

class ReduceKernel : public OpKernel {
 public:
  ReduceKernel(const KernelInfo& info, ReduceOp op) : op_(op), axes_(info) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    const bool bool_extremum =
        x.dtype() == DType::Bool && (op_ == ReduceOp::Max || op_ == ReduceOp::Min);
    if (!is_floating(x.dtype()) && !is_integral(x.dtype()) && !bool_extremum)
      ctx.fail("input dtype ", dtype_name(x.dtype()), " is not supported");
    const ReduceAxes::Resolved r = axes_.resolve(ctx, x);
    if (r.noop) {
      ctx.set_output(0, x);
      return;
    }
    Tensor& y = ctx.allocate_output(0, r.out_shape, x.dtype());
    const Layout L = make_layout(x.shape(), r.reduce_dim);
    if (y.numel() == 0) return;
    if (bool_extremum) {
      // ReduceMax/Min accept bool (opset 20): any/all, computed on the 0/1 bytes.
      static_assert(sizeof(bool) == 1);
      const auto* xp = static_cast<const uint8_t*>(x.raw_data());
      auto* yp = static_cast<uint8_t*>(y.raw_data());
      if (op_ == ReduceOp::Max)
        run_reduce<ReduceOp::Max>(ctx.execution(), xp, yp, L);
      else
        run_reduce<ReduceOp::Min>(ctx.execution(), xp, yp, L);
      for (int64_t i = 0; i < y.numel(); ++i) yp[i] = yp[i] != 0;  // empty-set min is 255
      return;
    }
    auto dispatch = [&](auto tag) {
      using T = decltype(tag);
      const T* xp = x.data<T>();
      T* yp = y.data<T>();
      switch (op_) {
        case ReduceOp::Sum:
          return run_reduce<ReduceOp::Sum>(ctx.execution(), xp, yp, L);
        case ReduceOp::Mean:
          return run_reduce<ReduceOp::Mean>(ctx.execution(), xp, yp, L);
        case ReduceOp::Max:
          return run_reduce<ReduceOp::Max>(ctx.execution(), xp, yp, L);
        case ReduceOp::Min:
          return run_reduce<ReduceOp::Min>(ctx.execution(), xp, yp, L);
        case ReduceOp::Prod:
          return run_reduce<ReduceOp::Prod>(ctx.execution(), xp, yp, L);
        case ReduceOp::L1:
          return run_reduce<ReduceOp::L1>(ctx.execution(), xp, yp, L);
        case ReduceOp::L2:
          return run_reduce<ReduceOp::L2>(ctx.execution(), xp, yp, L);
        case ReduceOp::LogSum:
          return run_reduce<ReduceOp::LogSum>(ctx.execution(), xp, yp, L);
        case ReduceOp::LogSumExp:
          return run_reduce<ReduceOp::LogSumExp>(ctx.execution(), xp, yp, L);
        case ReduceOp::SumSquare:
          return run_reduce<ReduceOp::SumSquare>(ctx.execution(), xp, yp, L);
      }
    };
    switch (x.dtype()) {
      case DType::Float16:
        return dispatch(Float16{});
      case DType::BFloat16:
        return dispatch(BFloat16{});
      default:
        return visit_numeric_dtype(x.dtype(), dispatch);
    }
  }

 private:
  ReduceOp op_;
  ReduceAxes axes_;
};

template <ReduceOp Op>
std::unique_ptr<OpKernel> make_reduce(const KernelInfo& info) {
  return std::make_unique<ReduceKernel>(info, Op);
}

DPRUN_REGISTER_KERNEL({.op_type = "ReduceSum", .since = 1, .factory = make_reduce<ReduceOp::Sum>});
DPRUN_REGISTER_KERNEL({.op_type = "ReduceMean",
                       .since = 1,
                       .factory = make_reduce<ReduceOp::Mean>});
DPRUN_REGISTER_KERNEL({.op_type = "ReduceMax", .since = 1, .factory = make_reduce<ReduceOp::Max>});
DPRUN_REGISTER_KERNEL({.op_type = "ReduceMin", .since = 1, .factory = make_reduce<ReduceOp::Min>});
DPRUN_REGISTER_KERNEL({.op_type = "ReduceProd",
                       .since = 1,
                       .factory = make_reduce<ReduceOp::Prod>});
DPRUN_REGISTER_KERNEL({.op_type = "ReduceL1", .since = 1, .factory = make_reduce<ReduceOp::L1>});
DPRUN_REGISTER_KERNEL({.op_type = "ReduceL2", .since = 1, .factory = make_reduce<ReduceOp::L2>});
DPRUN_REGISTER_KERNEL({.op_type = "ReduceLogSum",
                       .since = 1,
                       .factory = make_reduce<ReduceOp::LogSum>});
DPRUN_REGISTER_KERNEL({.op_type = "ReduceLogSumExp",
                       .since = 1,
                       .factory = make_reduce<ReduceOp::LogSumExp>});
DPRUN_REGISTER_KERNEL({.op_type = "ReduceSumSquare",
                       .since = 1,
                       .factory = make_reduce<ReduceOp::SumSquare>});

}  // namespace
}  // namespace dprun

// The ops' facts (engine/op_facts.h): output types, shapes, 16-bit and layout policy.
namespace dprun {
namespace {
DPRUN_REGISTER_OP_FACTS({.op_type = "ReduceL1", .shape = ShapeKind::ReduceAxes});
DPRUN_REGISTER_OP_FACTS({.op_type = "ReduceL2", .shape = ShapeKind::ReduceAxes});
DPRUN_REGISTER_OP_FACTS({.op_type = "ReduceLogSum", .shape = ShapeKind::ReduceAxes});
DPRUN_REGISTER_OP_FACTS({.op_type = "ReduceLogSumExp", .shape = ShapeKind::ReduceAxes});
DPRUN_REGISTER_OP_FACTS({.op_type = "ReduceMax", .shape = ShapeKind::ReduceAxes});
DPRUN_REGISTER_OP_FACTS({.op_type = "ReduceMean", .shape = ShapeKind::ReduceAxes});
DPRUN_REGISTER_OP_FACTS({.op_type = "ReduceMin", .shape = ShapeKind::ReduceAxes});
DPRUN_REGISTER_OP_FACTS({.op_type = "ReduceProd", .shape = ShapeKind::ReduceAxes});
DPRUN_REGISTER_OP_FACTS({.op_type = "ReduceSum", .shape = ShapeKind::ReduceAxes});
DPRUN_REGISTER_OP_FACTS({.op_type = "ReduceSumSquare", .shape = ShapeKind::ReduceAxes});

}  // namespace
}  // namespace dprun
