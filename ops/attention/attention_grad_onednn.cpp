// AttentionGrad (rewrite domain, float32; the node's contract: engine/rewrites/attention_fusion.h):
// the backward of Attention as the marked region its rule emits (attention_grad.cpp) computes
// it, per chunk of the batch (attention_layout.h): dV = P^T dO, dP = dO v^T into a buffer of one
// chunk's size, each row of it turned into dS in place while it is in cache, then dQ = dS kt^T
// and dK^T = q^T dS. dO is read through perm_o's strides, and each gradient is written through
// its operand's perm into the layout Q, K or V has: none of the rule's Transposes runs. dQ (or dK)
// is written over dOut where this node is dOut's last reader and they share a layout, as the
// chain's rules free dO once dP is computed: the node keeps no more memory alive than they did.
#include <algorithm>

#include "engine/rewrites/rewrite_domain.h"
#include "ops/attention/attention_layout.h"
#include "ops/attention/attention_rows.h"

namespace dprun {
namespace {

using namespace attention;

/// The products of one chunk: those of the gradients not wanted are absent.
struct BackwardProducts {
  std::optional<Product> dv, dp, dq, dk;
};

class AttentionGradKernel : public OpKernel {
 public:
  explicit AttentionGradKernel(const KernelInfo& info)
      : perms_(info.node),
        scale_(info.node.attr_float("scale", 1.0f)),
        where_(info.node.attr_string("mask", "") == "where"),
        fill_where_(info.node.attr_int("fill_where", 1) != 0) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& q = ctx.input(0);
    const Tensor& k = ctx.input(1);
    const Tensor& v = ctx.input(2);
    const Tensor& p = ctx.input(3);
    const Tensor& d_out = ctx.input(4);
    const Tensor* cond = where_ ? &ctx.input(5) : nullptr;
    for (const Tensor* t : {&k, &v, &p, &d_out})
      if (t->dtype() != DType::Float32) ctx.fail("every input but the condition must be float32");
    if (cond && cond->dtype() != DType::Bool) ctx.fail("the condition must be bool");
    const Shapes s = attention_shapes(ctx, perms_, q.shape(), k.shape(), v.shape());
    if (p.shape() != s.scores())
      ctx.fail("P is ", shape_to_string(p.shape()), "; the scores are ",
               shape_to_string(s.scores()));
    const View d_o = written_view(d_out.shape(), perms_.o);
    if (d_o.shape != s.result())
      ctx.fail("dOut is ", shape_to_string(d_out.shape()), ": it does not hold a result ",
               shape_to_string(s.result()), " through perm_o");
    const MaskView mv = cond ? mask_view(ctx, cond->shape(), s.scores()) : MaskView{};
    const bool want[3] = {ctx.output_wanted(0), ctx.output_wanted(1), ctx.output_wanted(2)};
    float* grads[3] = {};
    const Tensor* stored[3] = {&q, &k, &v};
    // dQ (else dK) goes over dOut where dOut dies here and both are read through the same view:
    // each chunk reads its part of dO before it writes its dQ (dK) at the same places.
    const View kt_t = transposed(s.kt);
    const View* view[3] = {&s.q, &kt_t, nullptr};
    bool reused = false;
    for (size_t i = 0; i < 3; ++i) {
      if (!want[i]) continue;
      const bool over_d_out = !reused && view[i] && view[i]->shape == d_o.shape &&
                              view[i]->strides == d_o.strides &&
                              stored[i]->shape() == d_out.shape();
      reused = reused || over_d_out;
      grads[i] = (over_d_out ? ctx.allocate_output_reusing(i, 4, d_out.shape(), DType::Float32)
                             : ctx.allocate_output(i, stored[i]->shape(), DType::Float32))
                     .data<float>();
    }
    if (shape_numel(s.scores()) == 0 || s.d == 0 || s.dv == 0) {
      for (size_t i = 0; i < 3; ++i)
        if (grads[i]) std::fill_n(grads[i], stored[i]->numel(), 0.0f);
      return;
    }
    const Chunks c = chunks_of(s);
    // The gradients through their operands' views: dQ like q, dK^T like kt, dV like v.
    const View dq = s.q, dkt = s.kt, dv = s.v;
    const double multiply_adds = 2.0 * static_cast<double>(shape_numel(s.batch)) * s.lq * s.lk *
                                 static_cast<double>(s.d + s.dv);
    std::vector<int64_t> key = onednn::shape_key({&q.shape(), &k.shape(), &v.shape()});
    key.insert(key.end(), {want[0], want[1], want[2]});
    onednn::run_sized(ctx, multiply_adds, [&] {
      auto prods = products_.get(key, [&] {
        auto b = std::make_shared<BackwardProducts>();
        const View scores = chunk_of(dense_view(s.scores()), c.size);
        if (want[2]) b->dv.emplace(transposed(scores), chunk_of(d_o, c.size), chunk_of(dv, c.size));
        if (want[0] || want[1])
          b->dp.emplace(chunk_of(d_o, c.size), transposed(chunk_of(s.v, c.size)), scores);
        if (want[0])
          b->dq.emplace(scores, transposed(chunk_of(s.kt, c.size)), chunk_of(dq, c.size));
        if (want[1])
          b->dk.emplace(transposed(chunk_of(s.q, c.size)), scores, chunk_of(dkt, c.size));
        return b;
      });
      float* ds =
          onednn::aligned_thread_buffer<AttentionGradKernel>(0, static_cast<size_t>(c.rows * s.lk));
      for (int64_t chunk = 0; chunk < c.count; ++chunk) {
        const int64_t first = chunk * c.size;
        const float* pc = p.data<float>() + chunk * c.rows * s.lk;
        const float* doc = d_out.data<float>() + first * d_o.strides[0];
        if (prods->dv) prods->dv->run(pc, doc, grads[2] + first * dv.strides[0]);
        if (!prods->dp) continue;
        prods->dp->run(doc, v.data<float>() + first * s.v.strides[0], ds);
        ctx.parallel_for(c.rows, std::max<int64_t>(1, 4096 / s.lk), [&](int64_t r0, int64_t r1) {
          for (int64_t r = r0; r < r1; ++r)
            score_gradient(pc + r * s.lk, ds + r * s.lk, s.lk, scale_,
                           cond ? cond->data<bool>() + mv.offset(chunk * c.rows + r) : nullptr,
                           mv.col_stride, fill_where_);
        });
        if (prods->dq)
          prods->dq->run(ds, k.data<float>() + first * s.kt.strides[0],
                         grads[0] + first * dq.strides[0]);
        if (prods->dk)
          prods->dk->run(q.data<float>() + first * s.q.strides[0], ds,
                         grads[1] + first * dkt.strides[0]);
      }
    });
  }

 private:
  Perms perms_;
  float scale_;
  bool where_, fill_where_;
  onednn::ShapeCache<BackwardProducts> products_;
};

DPRUN_REGISTER_KERNEL({.domain = kRewriteDomain,
                       .op_type = "AttentionGrad",
                       .dtypes = {DType::Float32},
                       .factory = make_kernel<AttentionGradKernel>});

}  // namespace
}  // namespace dprun
