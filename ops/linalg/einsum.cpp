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
#include "ops/common/reduce_common.h"

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

/// Every operand's label per dim, each label's size, and how often each letter appears.
struct OperandLabels {
  std::vector<std::vector<int>> labels;
  std::map<int, int64_t> label_size;
  std::map<int, int> letter_count;
};

/// The loop nest of the contraction: output and summed sizes, and per operand the element
/// stride of each output label and summed label.
struct Contraction {
  Shape out_shape;
  std::vector<int64_t> sum_sizes;
  int64_t sum_total = 0;
  std::vector<std::vector<int64_t>> out_strides, sum_strides;
};

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
    if (ctx.input_count() != terms_.size())
      ctx.fail("equation has ", terms_.size(), " operands but the node has ", ctx.input_count(),
               " inputs");
    const DType dtype = ctx.input(0).dtype();
    const int64_t ell_rank = check_operands(ctx, dtype);
    OperandLabels op = label_operands(ctx, ell_rank);
    const std::vector<int> out_labels = output_labels(ctx, ell_rank, op);
    std::vector<int> sum_labels;
    for (const auto& [l, size] : op.label_size)
      if (std::find(out_labels.begin(), out_labels.end(), l) == out_labels.end())
        sum_labels.push_back(l);
    const Contraction c = plan_contraction(ctx, op, out_labels, sum_labels);
    Tensor& y = ctx.allocate_output(0, c.out_shape, dtype);
    if (!is_floating(dtype) && !is_integral(dtype))
      ctx.fail("input dtype ", dtype_name(dtype), " is not supported");
    visit_numeric_dtype(dtype, [&](auto tag) { contract<decltype(tag)>(ctx, c, y); });
  }

 private:
  /// Checks the operands' dtypes and ranks against their terms; returns the rank of the
  /// ellipsis (the most dims any operand's "..." stands for).
  int64_t check_operands(const KernelContext& ctx, DType dtype) const {
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
    return ell_rank;
  }

  /// Label of every dim of every operand (ellipsis dims are right-aligned across operands)
  /// and the size of every label, checked to agree across operands.
  OperandLabels label_operands(const KernelContext& ctx, int64_t ell_rank) const {
    OperandLabels op;
    op.labels.resize(terms_.size());
    for (size_t k = 0; k < terms_.size(); ++k) {
      const Term& t = terms_[k];
      const Tensor& x = ctx.input(k);
      std::vector<int>& lab = op.labels[k];
      lab = t.letters_before;
      const int64_t own_ell =
          x.rank() - static_cast<int64_t>(t.letters_before.size() + t.letters_after.size());
      for (int64_t i = 0; i < own_ell; ++i)
        lab.push_back(kLetterLabels + static_cast<int>(ell_rank - own_ell + i));
      lab.insert(lab.end(), t.letters_after.begin(), t.letters_after.end());
      for (int l : t.letters_before) ++op.letter_count[l];
      for (int l : t.letters_after) ++op.letter_count[l];
      for (size_t d = 0; d < lab.size(); ++d) {
        const int64_t size = x.shape()[d];
        auto [it, inserted] = op.label_size.emplace(lab[d], size);
        if (inserted || it->second == size) continue;
        // Ellipsis dims broadcast; letters must agree exactly.
        if (lab[d] >= kLetterLabels && (it->second == 1 || size == 1))
          it->second = std::max(it->second, size);
        else
          ctx.fail("dimension sizes ", it->second, " and ", size,
                   " disagree for one label in operand ", k);
      }
    }
    return op;
  }

  /// The output's labels: the explicit output term, checked, or the implicit one (ellipsis
  /// dims, then the letters used exactly once).
  std::vector<int> output_labels(const KernelContext& ctx, int64_t ell_rank,
                                 const OperandLabels& op) const {
    const Node& node = ctx.node();
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
        if (!op.label_size.count(l)) node.fail("output label does not appear in any input");
        if (std::count(out_labels.begin(), out_labels.end(), l) > 1)
          node.fail("output repeats a label");
      }
    } else {
      for (int64_t i = 0; i < ell_rank; ++i)
        out_labels.push_back(kLetterLabels + static_cast<int>(i));
      for (const auto& [l, count] : op.letter_count)
        if (count == 1) out_labels.push_back(l);
    }
    // Implicit output letters are in character-code order, as numpy does (A-Z before a-z).
    if (!explicit_output_)
      std::stable_sort(out_labels.begin() + ell_rank, out_labels.end(), [](int a, int b) {
        return (a >= 26) > (b >= 26) || ((a >= 26) == (b >= 26) && a < b);
      });
    return out_labels;
  }

  /// The sizes and strides of the contraction's loops. Every label of out_labels and
  /// sum_labels is one of op.label_size's.
  static Contraction plan_contraction(const KernelContext& ctx, const OperandLabels& op,
                                      const std::vector<int>& out_labels,
                                      const std::vector<int>& sum_labels) {
    Contraction c;
    for (int l : out_labels) c.out_shape.push_back(op.label_size.at(l));
    for (int l : sum_labels) c.sum_sizes.push_back(op.label_size.at(l));
    c.sum_total = shape_numel(c.sum_sizes);
    // Dims sharing a label add their strides (a diagonal); broadcast size-1 dims contribute
    // nothing.
    const size_t K = op.labels.size();
    c.out_strides.resize(K);
    c.sum_strides.resize(K);
    for (size_t k = 0; k < K; ++k) {
      const Shape& s = ctx.input(k).shape();
      std::vector<int64_t> st(s.size(), 1);
      for (size_t d = s.size(); d-- > 1;) st[d - 1] = st[d] * s[d];
      auto stride_of = [&](int l) {
        int64_t total = 0;
        for (size_t d = 0; d < op.labels[k].size(); ++d)
          if (op.labels[k][d] == l && s[d] != 1) total += st[d];
        return total;
      };
      for (int l : out_labels) c.out_strides[k].push_back(stride_of(l));
      for (int l : sum_labels) c.sum_strides[k].push_back(stride_of(l));
    }
    return c;
  }

  /// y[j] = sum over the summed labels of the product of the operands, accumulated in double
  /// for floating types.
  template <class T>
  static void contract(const KernelContext& ctx, const Contraction& c, Tensor& y) {
    using A = std::conditional_t<std::is_floating_point_v<T>, double, T>;
    const size_t K = c.out_strides.size();
    const Shape& out_shape = c.out_shape;
    const std::vector<int64_t>& sum_sizes = c.sum_sizes;
    const int64_t sum_total = c.sum_total;
    const std::vector<std::vector<int64_t>>& out_strides = c.out_strides;
    const std::vector<std::vector<int64_t>>& sum_strides = c.sum_strides;
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
  }
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
