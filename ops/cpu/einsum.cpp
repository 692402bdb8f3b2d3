// Einsum (opset 12): a general reference implementation by index loops.
//
// Supports letters a-z/A-Z, one "..." per term (broadcast numpy-style across operands),
// repeated letters within an operand (diagonals), explicit ("->") and implicit outputs
// (ellipsis dims, then the letters used exactly once, alphabetically). Every output element
// sums the product of the operands over all combinations of the summed labels.
#include <algorithm>
#include <map>
#include <string>

#include "engine/op_facts.h"
#include "ops/cpu/reduce_common.h"

namespace dprun {
namespace {

struct Term {
  std::vector<int> letters_before;  // letter labels before "..." (or all when no ellipsis)
  std::vector<int> letters_after;   // letter labels after "..."
  bool ellipsis = false;
};

constexpr int kLetterLabels = 52;  // ellipsis dims get labels kLetterLabels + i

int letter_label(const Node& node, char c) {
  if (c >= 'a' && c <= 'z') return c - 'a';
  if (c >= 'A' && c <= 'Z') return 26 + (c - 'A');
  node.fail("unsupported character '", c, "' in equation");
}

Term parse_term(const Node& node, const std::string& s) {
  Term t;
  for (size_t i = 0; i < s.size();) {
    if (s.compare(i, 3, "...") == 0) {
      if (t.ellipsis) node.fail("equation term '", s, "' has more than one ellipsis");
      t.ellipsis = true;
      i += 3;
    } else {
      (t.ellipsis ? t.letters_after : t.letters_before).push_back(letter_label(node, s[i]));
      ++i;
    }
  }
  return t;
}

class EinsumKernel : public OpKernel {
 public:
  explicit EinsumKernel(const KernelInfo& info) {
    const Node& node = info.node;
    std::string eq;
    for (char c : node.attr_string("equation"))
      if (c != ' ') eq += c;
    const size_t arrow = eq.find("->");
    const std::string lhs = eq.substr(0, arrow);
    if (arrow != std::string::npos) {
      explicit_output_ = true;
      output_ = parse_term(node, eq.substr(arrow + 2));
    }
    size_t start = 0;
    while (true) {
      const size_t comma = lhs.find(',', start);
      terms_.push_back(parse_term(node, lhs.substr(start, comma - start)));
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }

  void compute(KernelContext& ctx) const override {
    const Node& node = ctx.node();
    if (ctx.input_count() != terms_.size())
      ctx.fail("equation has ", terms_.size(), " operands but the node has ", ctx.input_count(),
               " inputs");
    const DType dtype = ctx.input(0).dtype();
    // Label of every dim of every operand; ellipsis dims are right-aligned across operands.
    int64_t ell_rank = 0;
    for (size_t k = 0; k < terms_.size(); ++k) {
      const Term& t = terms_[k];
      const Tensor& x = ctx.input(k);
      if (x.dtype() != dtype) ctx.fail("all inputs must share one dtype");
      const int64_t letters =
          static_cast<int64_t>(t.letters_before.size() + t.letters_after.size());
      if (t.ellipsis ? x.rank() < letters : x.rank() != letters)
        ctx.fail("operand ", k, " of shape ", shape_to_string(x.shape()),
                 " does not match its equation term");
      if (t.ellipsis) ell_rank = std::max(ell_rank, x.rank() - letters);
    }
    std::map<int, int64_t> label_size;
    std::vector<std::vector<int>> labels(terms_.size());
    std::map<int, int> letter_count;
    for (size_t k = 0; k < terms_.size(); ++k) {
      const Term& t = terms_[k];
      const Tensor& x = ctx.input(k);
      std::vector<int>& lab = labels[k];
      lab = t.letters_before;
      const int64_t own_ell =
          x.rank() - static_cast<int64_t>(t.letters_before.size() + t.letters_after.size());
      for (int64_t i = 0; i < own_ell; ++i)
        lab.push_back(kLetterLabels + static_cast<int>(ell_rank - own_ell + i));
      lab.insert(lab.end(), t.letters_after.begin(), t.letters_after.end());
      for (int l : t.letters_before) ++letter_count[l];
      for (int l : t.letters_after) ++letter_count[l];
      for (size_t d = 0; d < lab.size(); ++d) {
        const int64_t size = x.shape()[d];
        auto [it, inserted] = label_size.emplace(lab[d], size);
        if (inserted || it->second == size) continue;
        // Ellipsis dims broadcast; letters must agree exactly.
        if (lab[d] >= kLetterLabels && (it->second == 1 || size == 1))
          it->second = std::max(it->second, size);
        else
          ctx.fail("dimension sizes ", it->second, " and ", size,
                   " disagree for one label in operand ", k);
      }
    }
    std::vector<int> out_labels;
    if (explicit_output_) {
      out_labels = output_.letters_before;
      if (output_.ellipsis)
        for (int64_t i = 0; i < ell_rank; ++i)
          out_labels.push_back(kLetterLabels + static_cast<int>(i));
      out_labels.insert(out_labels.end(), output_.letters_after.begin(),
                        output_.letters_after.end());
      if (!output_.ellipsis && ell_rank > 0)
        ctx.fail("the output term needs '...' because the inputs use an ellipsis with dims");
      for (int l : out_labels) {
        if (!label_size.count(l)) node.fail("output label does not appear in any input");
        if (std::count(out_labels.begin(), out_labels.end(), l) > 1)
          node.fail("output repeats a label");
      }
    } else {
      for (int64_t i = 0; i < ell_rank; ++i)
        out_labels.push_back(kLetterLabels + static_cast<int>(i));
      for (const auto& [l, count] : letter_count)
        if (count == 1) out_labels.push_back(l);
    }
    // Implicit output letters are in character-code order, as numpy does (A-Z before a-z).
    if (!explicit_output_)
      std::stable_sort(out_labels.begin() + ell_rank, out_labels.end(), [](int a, int b) {
        return (a >= 26) > (b >= 26) || ((a >= 26) == (b >= 26) && a < b);
      });
    std::vector<int> sum_labels;
    for (const auto& [l, size] : label_size)
      if (std::find(out_labels.begin(), out_labels.end(), l) == out_labels.end())
        sum_labels.push_back(l);

    Shape out_shape;
    for (int l : out_labels) out_shape.push_back(label_size[l]);
    std::vector<int64_t> sum_sizes;
    for (int l : sum_labels) sum_sizes.push_back(label_size[l]);
    const int64_t sum_total = shape_numel(sum_sizes);
    // Per operand, the element stride of each output label and summed label (dims sharing a
    // label add their strides: a diagonal); broadcast size-1 dims contribute nothing.
    const size_t K = terms_.size();
    std::vector<std::vector<int64_t>> out_strides(K), sum_strides(K);
    for (size_t k = 0; k < K; ++k) {
      const Shape& s = ctx.input(k).shape();
      std::vector<int64_t> st(s.size(), 1);
      for (size_t d = s.size(); d-- > 1;) st[d - 1] = st[d] * s[d];
      auto stride_of = [&](int l) {
        int64_t total = 0;
        for (size_t d = 0; d < labels[k].size(); ++d)
          if (labels[k][d] == l && s[d] != 1) total += st[d];
        return total;
      };
      for (int l : out_labels) out_strides[k].push_back(stride_of(l));
      for (int l : sum_labels) sum_strides[k].push_back(stride_of(l));
    }
    Tensor& y = ctx.allocate_output(0, out_shape, dtype);
    auto run = [&](auto tag) {
      using T = decltype(tag);
      using A = std::conditional_t<std::is_floating_point_v<T>, double, T>;
      std::vector<const T*> xs;
      for (size_t k = 0; k < K; ++k) xs.push_back(ctx.input(k).data<T>());
      T* yp = y.data<T>();
      ctx.parallel_for(y.numel(), std::max<int64_t>(1, 4096 / std::max<int64_t>(sum_total, 1)),
                       [&](int64_t j0, int64_t j1) {
                         std::vector<int64_t> base(K), idx(sum_sizes.size());
                         for (int64_t j = j0; j < j1; ++j) {
                           std::fill(base.begin(), base.end(), 0);
                           int64_t rest = j;
                           for (size_t d = out_shape.size(); d-- > 0;) {
                             const int64_t i = rest % out_shape[d];
                             rest /= out_shape[d];
                             for (size_t k = 0; k < K; ++k) base[k] += i * out_strides[k][d];
                           }
                           std::fill(idx.begin(), idx.end(), 0);
                           A acc = 0;
                           for (int64_t s = 0; s < sum_total; ++s) {
                             A prod = 1;
                             for (size_t k = 0; k < K; ++k) {
                               int64_t off = base[k];
                               for (size_t d = 0; d < idx.size(); ++d)
                                 off += idx[d] * sum_strides[k][d];
                               prod = static_cast<A>(prod * static_cast<A>(xs[k][off]));
                             }
                             acc = static_cast<A>(acc + prod);
                             for (size_t d = idx.size(); d-- > 0;) {
                               if (++idx[d] < sum_sizes[d]) break;
                               idx[d] = 0;
                             }
                           }
                           yp[j] = static_cast<T>(acc);
                         }
                       });
    };
    if (!is_floating(dtype) && !is_integral(dtype))
      ctx.fail("input dtype ", dtype_name(dtype), " is not supported");
    visit_numeric_dtype(dtype, run);
  }

 private:
  std::vector<Term> terms_;
  Term output_;
  bool explicit_output_ = false;
};

DPRUN_REGISTER_KERNEL({.op_type = "Einsum", .since = 12, .factory = make_kernel<EinsumKernel>});

}  // namespace
}  // namespace dprun

// The ops' facts (engine/op_facts.h): output types, shapes, 16-bit and layout policy.
namespace dprun {
namespace {
DPRUN_REGISTER_OP_FACTS({.op_type = "Einsum"});

}  // namespace
}  // namespace dprun
