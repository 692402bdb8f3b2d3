// BatchNormalization over channel axis 1 of X [N, C, D1, ...].
//
// Inference: Y = (X - mean) / sqrt(var + epsilon) * scale + B, folded into Y = X * a + b per
// channel. Training uses the batch statistics (population variance, as the ONNX spec's
// ReduceVar and reference data do) and also outputs the updated running statistics
// running = input * momentum + batch * (1 - momentum).
// Training is selected by training_mode (opset 14+) or, before that, by the node asking for
// more than one output (opsets 1-13 list mean/var/saved_mean/saved_var as training outputs).
// Before opset 9, spatial=0 gives per-activation parameters of shape [C, D1, ...].
#include <cmath>
#include <tuple>
#include <type_traits>

#include "engine/op_facts.h"
#include "ops/common/nhwc_kernel.h"
#include "ops/normalization/batch_norm_checks.h"
#include "ops/normalization/norm_loops.h"

namespace dprun {
namespace {

class BatchNormKernel : public OpKernel {
 public:
  explicit BatchNormKernel(const KernelInfo& info)
      : epsilon_(info.node.attr_float("epsilon", 1e-5f)),
        momentum_(info.node.attr_float("momentum", 0.9f)),
        spatial_(info.opset < 9 ? info.node.attr_int("spatial", 1) != 0 : true),
        training_(batch_norm_training(info)) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    const BatchNormDims dims = batch_norm_dims(ctx, x);
    const int64_t N = dims.n, C = dims.c, S = dims.s;
    // Parameters are per channel, or per activation ([C, D1, ...]) when spatial=0.
    const bool per_activation = !spatial_ && S != 1;
    const int64_t P = per_activation ? C * S : C;
    check_batch_norm_params(ctx, P, x.shape());
    Tensor& y = ctx.allocate_output(0, x.shape(), x.dtype());
    visit_float_dtype(ctx, x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      using C_t = std::conditional_t<std::is_same_v<T, double>, double, float>;
      run<T, C_t>(ctx, x, y, N, C, S, P, per_activation);
    });
  }

 private:
  template <class T, class Ct>
  void run(KernelContext& ctx, const Tensor& x, Tensor& y, int64_t N, int64_t C, int64_t S,
           int64_t P, bool per_activation) const {
    const std::vector<double> scale = read_as<double>(ctx, ctx.input(1), "scale");
    const std::vector<double> bias = read_as<double>(ctx, ctx.input(2), "B");
    std::vector<double> mean = read_as<double>(ctx, ctx.input(3), "mean");
    std::vector<double> var = read_as<double>(ctx, ctx.input(4), "var");
    const T* xp = x.data<T>();
    // Element (n, c, s) uses parameter c, or c * S + s per activation.
    std::vector<double> batch_mean, batch_var;
    if (training_) {
      batch_mean.assign(static_cast<size_t>(P), 0.0);
      batch_var.assign(static_cast<size_t>(P), 0.0);
      ctx.parallel_for(C, 1, [&](int64_t c0, int64_t c1) {
        for (int64_t c = c0; c < c1; ++c) {
          if (per_activation) {  // each (c, s) over the N rows, one value each
            for (int64_t s = 0; s < S; ++s)
              std::tie(batch_mean[c * S + s], batch_var[c * S + s]) =
                  strided_moments(xp + c * S + s, N, C * S, 1);
          } else {
            std::tie(batch_mean[c], batch_var[c]) = strided_moments(xp + c * S, N, C * S, S);
          }
        }
      });
    }
    const std::vector<double>& use_mean = training_ ? batch_mean : mean;
    const std::vector<double>& use_var = training_ ? batch_var : var;
    std::vector<Ct> a(static_cast<size_t>(P)), b(static_cast<size_t>(P));
    for (int64_t p = 0; p < P; ++p) {
      const double ap = scale[p] / std::sqrt(use_var[p] + static_cast<double>(epsilon_));
      a[p] = static_cast<Ct>(ap);
      b[p] = static_cast<Ct>(bias[p] - use_mean[p] * ap);
    }
    T* yp = y.data<T>();
    ctx.parallel_for(N * C, std::max<int64_t>(1, 16384 / std::max<int64_t>(S, 1)),
                     [&](int64_t r0, int64_t r1) {
                       for (int64_t r = r0; r < r1; ++r) {
                         const int64_t c = r % C;
                         const T* xr = xp + r * S;
                         T* yr = yp + r * S;
                         if (per_activation) {
                           const Ct* ar = a.data() + c * S;
                           const Ct* br = b.data() + c * S;
                           for (int64_t s = 0; s < S; ++s)
                             yr[s] = store_as<T>(load_as<Ct>(xr[s]) * ar[s] + br[s]);
                         } else {
                           const Ct ac = a[c], bc = b[c];
                           for (int64_t s = 0; s < S; ++s)
                             yr[s] = store_as<T>(load_as<Ct>(xr[s]) * ac + bc);
                         }
                       }
                     });
    if (!training_) return;
    // Running statistics (outputs 1, 2) in the dtype of the mean/var inputs; opsets before 14
    // also output the batch statistics (3, 4).
    const double mom = momentum_;
    auto emit = [&](size_t index, const Tensor& like, auto&& value) {
      if (ctx.output_count() <= index || !ctx.output_wanted(index)) return;
      Tensor& out = ctx.allocate_output(index, like.shape(), like.dtype());
      visit_float_dtype(ctx, like.dtype(), [&](auto tag) {
        using U = decltype(tag);
        U* p = out.data<U>();
        for (int64_t i = 0; i < P; ++i) p[i] = store_as<U>(value(i));
      });
    };
    emit(1, ctx.input(3), [&](int64_t i) { return mean[i] * mom + batch_mean[i] * (1 - mom); });
    emit(2, ctx.input(4), [&](int64_t i) { return var[i] * mom + batch_var[i] * (1 - mom); });
    emit(3, ctx.input(3), [&](int64_t i) { return batch_mean[i]; });
    emit(4, ctx.input(4), [&](int64_t i) { return batch_var[i]; });
  }

  float epsilon_;
  float momentum_;
  bool spatial_;
  bool training_;
};

DPRUN_REGISTER_KERNEL({.op_type = "BatchNormalization",
                       .since = 1,
                       .factory = make_kernel<BatchNormKernel>});

}  // namespace
}  // namespace dprun

// The ops' facts (engine/op_facts.h): output types, shapes, 16-bit and layout policy.
namespace dprun {
namespace {
/// The inference form only (one output) runs on NHWC values: a per-channel scale and shift by
/// 1-D values (exporters may pass shared parameters through Identity nodes, so they need not
/// be initializers). Training mode and the per-activation form (spatial = 0) stay in NCHW.
bool batch_norm_runs_in_nhwc(const LayoutQuery& query) {
  const Node& n = query.node;
  bool take = query.is_nhwc(n.inputs[0]) && n.inputs.size() == 5 &&
              n.attr_int("training_mode", 0) == 0 && n.attr_int("spatial", 1) == 1;
  for (size_t k = 1; take && k < 5; ++k) {
    auto t = query.graph.type_of(n.inputs[k]);
    take = t && t->shape && t->shape->size() == 1;
  }
  return take;
}

DPRUN_REGISTER_OP_FACTS({.op_type = "BatchNormalization",
                         .shape = ShapeKind::SameAsInput0,
                         .layout = {.runs_in_nhwc = batch_norm_runs_in_nhwc,
                                    .to_nhwc = use_nhwc_kernel,
                                    .absorbs_activation = true}});

}  // namespace
}  // namespace dprun
