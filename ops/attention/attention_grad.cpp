// The gradient of Attention (rewrite domain; engine/rewrites/attention_fusion.h), the node the
// gradient builder differentiates an exported attention chain as: the backward of the whole
// chain in plain ONNX, with q, kt and v the operands read through their perms, dO the result's
// gradient read through perm_o's inverse, and P the chain's Softmax result (output 1):
//   dv = P^T dO                                   -> dV through perm_v's inverse
//   dP = dO v^T
//   dS = scale * P * (dP - ReduceSum(P * dP))     0 where a Where mask filled the score
//   dq = dS kt^T                                  -> dQ through perm_q's inverse
//   dkt = q^T dS                                  -> dK through perm_k's inverse
// (a scale on q before the product gives the same dS: the chain's scalars multiply into one).
// An added mask gets no gradient: the gradient builder differentiates the chain as one node only
// when the mask does not depend on what is differentiated.
//
// The nodes are marked as one region (engine/rewrites/marked_region.h) for the CPU backend,
// which runs it as one AttentionGrad node: the received gradient passes through an Identity
// first, the given ones through Identities last, in Q, K, V order, followed by an unread Constant
// [kAttentionGradMagic, kAttentionGradVersion, given dQ, given dK, given dV]. The graph stays
// plain ONNX.
#include <numeric>

#include "engine/rewrites/attention_fusion.h"
#include "engine/rewrites/rewrite_domain.h"
#include "ops/grad/grad_util.h"

namespace dprun {
namespace {

std::vector<int64_t> inverse(const std::vector<int64_t>& perm) {
  std::vector<int64_t> inv(perm.size());
  for (size_t i = 0; i < perm.size(); ++i)
    inv[static_cast<size_t>(perm[i])] = static_cast<int64_t>(i);
  return inv;
}

class AttentionBackward {
 public:
  explicit AttentionBackward(GradientContext& ctx)
      : ctx_(ctx), dt_(ctx.dtype_of(ctx.I(0))), rank_(ctx.require_rank(ctx.O(0))) {}

  void run() {
    const Node& n = ctx_.node();
    if (ctx_.output_count() < 2 || ctx_.O(1).empty())
      ctx_.fail("the chain's probabilities (output 1) are not named");
    if (ctx_.has_GO(1)) ctx_.fail("a gradient of the probabilities is not taken");
    if (ctx_.input_count() > 3 && ctx_.wants_GI(3))
      ctx_.fail("the added mask's gradient is not taken");
    const std::string d_out = ctx_.emit("Identity", {ctx_.GO(0)});
    const std::string d_o = permuted(d_out, inverse_of("perm_o"));
    const std::string& p = ctx_.O(1);
    std::string given[3];
    if (ctx_.wants_GI(2))
      given[2] = permuted(ctx_.emit("MatMul", {swapped(p), d_o}), inverse_of("perm_v"));
    if (ctx_.wants_GI(0) || ctx_.wants_GI(1)) {
      const std::string ds = score_gradient(n, p, d_o);
      if (ctx_.wants_GI(0)) {
        const std::string k = swapped(permuted(ctx_.I(1), n.attr_ints("perm_k", {})));
        given[0] = permuted(ctx_.emit("MatMul", {ds, k}), inverse_of("perm_q"));
      }
      if (ctx_.wants_GI(1)) {
        const std::string qt = swapped(permuted(ctx_.I(0), n.attr_ints("perm_q", {})));
        given[1] = permuted(ctx_.emit("MatMul", {qt, ds}), inverse_of("perm_k"));
      }
    }
    // The region's end: an Identity per given gradient in input order, then the table.
    std::vector<int64_t> table = {kAttentionGradMagic, kAttentionGradVersion};
    for (size_t i = 0; i < 3; ++i) {
      const bool give = ctx_.wants_GI(i);
      if (give) ctx_.set_GI(i, ctx_.emit("Identity", {given[i]}));
      table.push_back(give ? 1 : 0);
    }
    ctx_.ints(table);
  }

 private:
  // dS = scale * P * (dP - ReduceSum(P * dP)), zero where a Where mask filled the score.
  std::string score_gradient(const Node& n, const std::string& p, const std::string& d_o) {
    const std::string v = permuted(ctx_.I(2), n.attr_ints("perm_v", {}));
    const std::string dp = ctx_.emit("MatMul", {d_o, swapped(v)});
    const std::string dot = ctx_.reduce_sum(ctx_.emit("Mul", {dp, p}), {-1}, true);
    std::string ds = ctx_.emit("Mul", {p, ctx_.emit("Sub", {dp, dot})});
    if (n.attr_string("mask", "") == "where") {
      const std::string zero = ctx_.scalar(0, dt_);
      ds = n.attr_int("fill_where", 1) != 0 ? ctx_.emit("Where", {ctx_.I(3), zero, ds})
                                            : ctx_.emit("Where", {ctx_.I(3), ds, zero});
    }
    return ctx_.emit("Mul", {ds, ctx_.scalar(n.attr_float("scale", 1.0f), dt_)});
  }

  std::vector<int64_t> inverse_of(const char* attr) const {
    return inverse(ctx_.node().attr_ints(attr, {}));
  }

  std::string permuted(const std::string& x, const std::vector<int64_t>& perm) {
    if (perm.empty()) return x;
    return ctx_.emit("Transpose", {x}, {{"perm", Attribute::of_ints(perm)}});
  }

  // x, of the chain's rank, with its last two dims swapped.
  std::string swapped(const std::string& x) {
    std::vector<int64_t> perm(static_cast<size_t>(rank_));
    std::iota(perm.begin(), perm.end(), 0);
    std::swap(perm[perm.size() - 1], perm[perm.size() - 2]);
    return permuted(x, perm);
  }

  GradientContext& ctx_;
  DType dt_;
  int64_t rank_;
};

void attention_grad(GradientContext& ctx) {
  AttentionBackward(ctx).run();
}

DPRUN_REGISTER_GRADIENT({.domain = kRewriteDomain, .op_type = "Attention", .rule = attention_grad});

}  // namespace
}  // namespace dprun
