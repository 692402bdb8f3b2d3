// TfIdfVectorizer over integer token sequences: counts the pool's n-grams (lengths
// min_gram_length..max_gram_length, tokens up to max_skip_count apart) in each row of X and
// maps the counts to output slots through ngram_indexes. Unigrams are counted once per
// position; longer n-grams once per (position, skip distance). String tokens are not
// supported (the engine's tensors cannot hold strings).
#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "engine/op_facts.h"
#include "ops/common/reduce_common.h"

namespace dprun {
namespace {

class TfIdfVectorizerKernel : public OpKernel {
 public:
  explicit TfIdfVectorizerKernel(const KernelInfo& info) {
    const Node& node = info.node;
    min_gram_ = node.attr_int("min_gram_length");
    max_gram_ = node.attr_int("max_gram_length");
    max_skip_ = node.attr_int("max_skip_count");
    if (min_gram_ < 1 || max_gram_ < min_gram_ || max_skip_ < 0)
      node.fail("need 1 <= min_gram_length <= max_gram_length and max_skip_count >= 0");
    std::string mode = node.attr_string("mode");
    if (mode == "TF")
      mode_ = 0;
    else if (mode == "IDF")
      mode_ = 1;
    else if (mode == "TFIDF")
      mode_ = 2;
    else
      node.fail("mode must be TF, IDF or TFIDF, got '", mode, "'");
    if (node.has_attr("pool_strings") && !node.has_attr("pool_int64s"))
      node.fail("string pools are not supported; only integer tokens (pool_int64s)");
    std::vector<int64_t> pool = node.attr_ints("pool_int64s");
    std::vector<int64_t> counts = node.attr_ints("ngram_counts");
    std::vector<int64_t> indexes = node.attr_ints("ngram_indexes");
    weights_ = node.attr_floats("weights", {});
    int64_t k = 0;
    for (size_t g = 0; g < counts.size(); ++g) {
      const int64_t n = static_cast<int64_t>(g) + 1;
      const int64_t begin = counts[g];
      const int64_t end = g + 1 < counts.size() ? counts[g + 1] : static_cast<int64_t>(pool.size());
      if (begin < 0 || end < begin || end > static_cast<int64_t>(pool.size()) ||
          (end - begin) % n != 0)
        node.fail("ngram_counts ", shape_to_string(counts), " does not partition a pool of ",
                  pool.size(), " tokens");
      for (int64_t p = begin; p < end; p += n, ++k) {
        if (k >= static_cast<int64_t>(indexes.size()))
          node.fail("ngram_indexes has fewer entries than the pool has n-grams");
        grams_[std::vector<int64_t>(pool.begin() + p, pool.begin() + p + n)] =
            indexes[static_cast<size_t>(k)];
      }
    }
    for (int64_t i : indexes) {
      if (i < 0) node.fail("ngram_indexes must be non-negative");
      out_size_ = std::max(out_size_, i + 1);
    }
    if (!weights_.empty() && static_cast<int64_t>(weights_.size()) < out_size_)
      node.fail("weights must have an entry per output slot");
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    if (x.dtype() != DType::Int32 && x.dtype() != DType::Int64)
      ctx.fail("X must be int32 or int64 (string input is not supported), got ",
               dtype_name(x.dtype()));
    if (x.rank() != 1 && x.rank() != 2)
      ctx.fail("X must be [C] or [N, C], got ", shape_to_string(x.shape()));
    const int64_t rows = x.rank() == 2 ? x.dim(0) : 1, len = x.dim(-1);
    const std::vector<int64_t> tok = read_int_list(ctx, x, "X");
    Shape out_shape = x.rank() == 2 ? Shape{rows, out_size_} : Shape{out_size_};
    Tensor& y = ctx.allocate_output(0, out_shape, DType::Float32);
    float* out = y.data<float>();
    std::fill(out, out + y.numel(), 0.f);
    std::vector<int64_t> gram;
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t* row = tok.data() + r * len;
      float* o = out + r * out_size_;
      auto count = [&]() {
        auto it = grams_.find(gram);
        if (it != grams_.end()) o[it->second] += 1.f;
      };
      for (int64_t s = 0; s < len; ++s) {
        if (min_gram_ == 1) {
          gram.assign(1, row[s]);
          count();
        }
        if (max_gram_ < 2) continue;
        for (int64_t skip = 0; skip <= max_skip_; ++skip) {
          gram.assign(1, row[s]);
          for (int64_t n = 2; n <= max_gram_; ++n) {
            const int64_t pos = s + (n - 1) * (skip + 1);
            if (pos >= len) break;
            gram.push_back(row[pos]);
            if (n >= min_gram_) count();
          }
        }
      }
      for (int64_t i = 0; i < out_size_; ++i) {
        const float w = weights_.empty() ? 1.f : weights_[static_cast<size_t>(i)];
        if (mode_ == 1)
          o[i] = o[i] > 0 ? w : 0.f;
        else if (mode_ == 2)
          o[i] *= w;
      }
    }
  }

 private:
  int64_t min_gram_ = 1, max_gram_ = 1, max_skip_ = 0, mode_ = 0, out_size_ = 0;
  std::vector<float> weights_;
  std::map<std::vector<int64_t>, int64_t> grams_;
};

DPRUN_REGISTER_KERNEL({.op_type = "TfIdfVectorizer",
                       .since = 9,
                       .factory = make_kernel<TfIdfVectorizerKernel>});

}  // namespace
}  // namespace dprun

// The ops' facts (engine/op_facts.h): output types, shapes, 16-bit and layout policy.
namespace dprun {
namespace {
DPRUN_REGISTER_OP_FACTS({.op_type = "TfIdfVectorizer"});

}  // namespace
}  // namespace dprun
