// Attention (rewrite domain, float32; the node's contract: engine/rewrites/attention_fusion.h):
// per chunk of the batch (attention_layout.h), the scores q kt by one oneDNN product reading Q
// and K through their perms' strides, then each row scaled, masked and turned into
// probabilities in place while it is in cache, then P v by a second product written through
// perm_o's strides. The scores go where P is wanted (the backward reads P), else to a buffer of
// one chunk's size: neither S nor its scaled and masked copies are ever stored whole.
#include <algorithm>

#include "engine/rewrites/rewrite_domain.h"
#include "ops/attention/attention_layout.h"
#include "ops/attention/attention_rows.h"
#include "ops/softmax/softmax_row.h"

namespace dprun {
namespace {

using namespace attention;

/// The two products of one chunk.
struct ForwardProducts {
  Product scores, result;
};

/// How the scores are masked before the softmax.
enum class MaskKind { None, Add, Where };

class AttentionKernel : public OpKernel {
 public:
  explicit AttentionKernel(const KernelInfo& info)
      : perms_(info.node),
        scale_(info.node.attr_float("scale", 1.0f)),
        fill_(info.node.attr_float("fill", 0.0f)),
        fill_where_(info.node.attr_int("fill_where", 1) != 0) {
    const std::string mask = info.node.attr_string("mask", "");
    if (mask == "add")
      mask_ = MaskKind::Add;
    else if (mask == "where")
      mask_ = MaskKind::Where;
    else if (!mask.empty())
      info.node.fail("mask '", mask, "' is neither 'add' nor 'where'");
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& q = ctx.input(0);
    const Tensor& k = ctx.input(1);
    const Tensor& v = ctx.input(2);
    const Tensor* mask = mask_ == MaskKind::None ? nullptr : &ctx.input(3);
    if (k.dtype() != DType::Float32 || v.dtype() != DType::Float32)
      ctx.fail("Q, K and V must all be float32");
    if (mask && mask->dtype() != (mask_ == MaskKind::Add ? DType::Float32 : DType::Bool))
      ctx.fail("the mask is ", dtype_name(mask->dtype()), ": an added mask is float32, a Where's ",
               "condition bool");
    const Shapes s = attention_shapes(ctx, perms_, q.shape(), k.shape(), v.shape());
    Shape out_shape = s.result();
    if (!perms_.o.empty()) {
      if (perms_.o.size() != out_shape.size()) ctx.fail("perm_o does not fit the result's rank");
      for (size_t i = 0; i < out_shape.size(); ++i)
        out_shape[i] = s.result()[static_cast<size_t>(perms_.o[i])];
    }
    Tensor& out = ctx.allocate_output(0, out_shape, DType::Float32);
    float* probs = ctx.output_wanted(1)
                       ? ctx.allocate_output(1, s.scores(), DType::Float32).data<float>()
                       : nullptr;
    const MaskView mv = mask ? mask_view(ctx, mask->shape(), s.scores()) : MaskView{};
    if (out.numel() == 0) return;
    if (s.lk == 0 || s.d == 0) ctx.fail("empty keys or heads: no attention to compute");
    const Chunks c = chunks_of(s);
    const View o_view = written_view(out_shape, perms_.o);
    const double multiply_adds =
        static_cast<double>(shape_numel(s.batch)) * s.lq * s.lk * static_cast<double>(s.d + s.dv);
    onednn::run_sized(ctx, multiply_adds, [&] {
      auto p = products_.get(onednn::shape_key({&q.shape(), &k.shape(), &v.shape()}), [&] {
        const View scores = chunk_of(dense_view(s.scores()), c.size);
        return std::make_shared<ForwardProducts>(
            ForwardProducts{Product(chunk_of(s.q, c.size), chunk_of(s.kt, c.size), scores),
                            Product(scores, chunk_of(s.v, c.size), chunk_of(o_view, c.size))});
      });
      float* buffer = probs ? nullptr
                            : onednn::aligned_thread_buffer<AttentionKernel>(
                                  0, static_cast<size_t>(c.rows * s.lk));
      for (int64_t chunk = 0; chunk < c.count; ++chunk) {
        const int64_t first = chunk * c.size;
        float* sc = probs ? probs + chunk * c.rows * s.lk : buffer;
        p->scores.run(q.data<float>() + first * s.q.strides[0],
                      k.data<float>() + first * s.kt.strides[0], sc);
        ctx.parallel_for(c.rows, std::max<int64_t>(1, 4096 / s.lk), [&](int64_t r0, int64_t r1) {
          for (int64_t r = r0; r < r1; ++r)
            softmax_row(sc + r * s.lk, s.lk, mask, mv, chunk * c.rows + r);
        });
        p->result.run(sc, v.data<float>() + first * s.v.strides[0],
                      out.data<float>() + first * o_view.strides[0]);
      }
    });
  }

 private:
  /// Row `row` of the scores, y: scaled, masked, then its softmax, in place.
  void softmax_row(float* y, int64_t n, const Tensor* mask, const MaskView& mv, int64_t row) const {
    if (mask_ == MaskKind::Where)
      fill_scores(y, n, scale_, mask->data<bool>() + mv.offset(row), mv.col_stride, fill_where_,
                  fill_);
    else
      scale_scores(y, n, scale_, mask ? mask->data<float>() + mv.offset(row) : nullptr,
                   mv.col_stride);
    ::dprun::softmax_row(y, y, n);
  }

  Perms perms_;
  float scale_, fill_;
  bool fill_where_;
  MaskKind mask_ = MaskKind::None;
  onednn::ShapeCache<ForwardProducts> products_;
};

DPRUN_REGISTER_KERNEL({.domain = kRewriteDomain,
                       .op_type = "Attention",
                       .dtypes = {DType::Float32},
                       .factory = make_kernel<AttentionKernel>});

}  // namespace
}  // namespace dprun
