#include "ops/attention/attention_layout.h"

#include <algorithm>
#include <numeric>
#include <utility>

namespace dprun::attention {
namespace {

dnnl::memory::desc desc_of(const View& v) {
  return dnnl::memory::desc(onednn::to_dims(v.shape), dnnl::memory::data_type::f32,
                            dnnl::memory::dims(v.strides.begin(), v.strides.end()));
}

}  // namespace

View transposed(View v) {
  const size_t r = v.shape.size();
  std::swap(v.shape[r - 1], v.shape[r - 2]);
  std::swap(v.strides[r - 1], v.strides[r - 2]);
  return v;
}

View read_view(const Shape& stored, const std::vector<int64_t>& perm) {
  return perm.empty() ? dense_view(stored) : permuted_view(stored, perm);
}

View written_view(const Shape& stored, const std::vector<int64_t>& perm) {
  if (perm.empty()) return dense_view(stored);
  const std::vector<int64_t> dense = contiguous_strides(stored);
  View v{Shape(perm.size()), std::vector<int64_t>(perm.size()), 0};
  // Stored dim i holds the result's dim perm[i].
  for (size_t i = 0; i < perm.size(); ++i) {
    v.shape[static_cast<size_t>(perm[i])] = stored[i];
    v.strides[static_cast<size_t>(perm[i])] = dense[i];
  }
  return v;
}

View dense_view(const Shape& dims) {
  return View{dims, contiguous_strides(dims), 0};
}

Perms::Perms(const Node& node)
    : q(node.attr_ints("perm_q", {})),
      k(node.attr_ints("perm_k", {})),
      v(node.attr_ints("perm_v", {})),
      o(node.attr_ints("perm_o", {})) {}

Shape Shapes::scores() const {
  Shape s = batch;
  s.push_back(lq);
  s.push_back(lk);
  return s;
}

Shape Shapes::result() const {
  Shape s = batch;
  s.push_back(lq);
  s.push_back(dv);
  return s;
}

Shapes attention_shapes(const KernelContext& ctx, const Perms& perms, const Shape& q,
                        const Shape& k, const Shape& v) {
  const char* names[] = {"Q", "K", "V"};
  const Shape* stored[] = {&q, &k, &v};
  const std::vector<int64_t>* perm[] = {&perms.q, &perms.k, &perms.v};
  View views[3];
  for (size_t i = 0; i < 3; ++i) {
    if (stored[i]->size() < 3 || (!perm[i]->empty() && perm[i]->size() != stored[i]->size()))
      ctx.fail(names[i], " is ", shape_to_string(*stored[i]), ": it must have rank >= 3",
               perm[i]->empty() ? "" : " and as many dims as its perm");
    views[i] = read_view(*stored[i], *perm[i]);
  }
  Shapes s{views[0], views[1], views[2]};
  const size_t r = s.q.shape.size();
  s.batch = Shape(s.q.shape.begin(), s.q.shape.end() - 2);
  s.lq = s.q.shape[r - 2];
  s.d = s.q.shape.back();
  s.lk = s.kt.shape.back();
  s.dv = s.v.shape.back();
  if (s.kt.shape.size() != r || s.v.shape.size() != r ||
      !std::equal(s.batch.begin(), s.batch.end(), s.kt.shape.begin()) ||
      !std::equal(s.batch.begin(), s.batch.end(), s.v.shape.begin()) || s.kt.shape[r - 2] != s.d ||
      s.v.shape[r - 2] != s.lk)
    ctx.fail("q ", shape_to_string(s.q.shape), ", k^T ", shape_to_string(s.kt.shape), " and v ",
             shape_to_string(s.v.shape), " (Q, K and V read through their perms) do not make an ",
             "attention: [batch..., Lq, d], [batch..., d, Lk], [batch..., Lk, dv]");
  return s;
}

Chunks chunks_of(const Shapes& s) {
  Chunks c;
  const int64_t first = s.batch[0];
  const int64_t per_entry = s.lq * shape_numel(Shape(s.batch.begin() + 1, s.batch.end()));
  const int64_t entry_bytes = per_entry * s.lk * static_cast<int64_t>(sizeof(float));
  for (int64_t size = 1; size <= first; ++size)
    if (first % size == 0 && (size == 1 || size * entry_bytes <= kChunkBytes)) c.size = size;
  c.count = first / std::max<int64_t>(c.size, 1);
  c.rows = c.size * per_entry;
  return c;
}

int64_t MaskView::offset(int64_t row) const {
  int64_t at = 0;
  for (size_t i = row_dims.size(); i-- > 0;) {
    at += (row % row_dims[i]) * row_strides[i];
    row /= row_dims[i];
  }
  return at;
}

MaskView mask_view(const KernelContext& ctx, const Shape& mask, const Shape& scores) {
  if (mask.size() > scores.size())
    ctx.fail("the mask ", shape_to_string(mask), " has more dims than the scores ",
             shape_to_string(scores));
  const std::vector<int64_t> dense = contiguous_strides(mask);
  const size_t lead = scores.size() - mask.size();
  std::vector<int64_t> strides(scores.size(), 0);
  for (size_t i = 0; i < mask.size(); ++i) {
    const int64_t want = scores[lead + i];
    if (mask[i] != 1 && mask[i] != want)
      ctx.fail("the mask ", shape_to_string(mask), " does not broadcast to the scores ",
               shape_to_string(scores));
    strides[lead + i] = mask[i] == 1 ? 0 : dense[i];
  }
  MaskView m;
  m.row_dims = Shape(scores.begin(), scores.end() - 1);
  m.row_strides = std::vector<int64_t>(strides.begin(), strides.end() - 1);
  m.col_stride = strides.back();
  return m;
}

View chunk_of(View v, int64_t size) {
  v.shape[0] = size;
  return v;
}

Product::Product(const View& a, const View& b, const View& c) {
  View pa = a, pb = b, pc = c;
  if (c.strides.back() != 1 && c.strides[c.strides.size() - 2] == 1) {
    swapped_ = true;
    pa = transposed(b);
    pb = transposed(a);
    pc = transposed(c);
  }
  a_md_ = desc_of(pa);
  b_md_ = desc_of(pb);
  c_md_ = desc_of(pc);
  dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md_, b_md_, c_md_),
                                  onednn::concurrent_attr(), onednn::cpu_engine());
  scratchpad_md_ = pd.scratchpad_desc();
  prim_ = dnnl::matmul(pd);
}

void Product::run(const float* a, const float* b, float* c) const {
  if (swapped_) std::swap(a, b);
  onednn::execute_reusing(
      prim_, scratchpad_md_,
      {{DNNL_ARG_SRC, &a_md_, a}, {DNNL_ARG_WEIGHTS, &b_md_, b}, {DNNL_ARG_DST, &c_md_, c}});
}

}  // namespace dprun::attention
