#pragma once
// GELU as exporters write it before Gelu-20, in its erf form 0.5 * x * (1 + erf(x / sqrt 2)) and
// its tanh form 0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 x^3))), and both forms'
// gradients as ops/elementwise/gelu_grad.cpp writes them: found so that each runs as one node of
// the rewrite domain (the backends' op fusion, engine/rewrites/op_fusion.h), and so that the
// gradient builder differentiates the forward chain as one Gelu
// (engine/autograd/gradient_builder.h).
#include <optional>

#include "engine/rewrites/fusion_matcher.h"

namespace dprun {

/// The forward chain whose Erf or Tanh is node `i`, as Gelu(x) of the rewrite domain (with
/// approximate "tanh" for the tanh form), named and placed as the chain's last node:
/// - erf form: Mul(Mul(x, Add(Erf(Div(x, sqrt 2)), 1)), 0.5), Div by sqrt 2 or Mul by 1/sqrt 2;
/// - tanh form: Mul(Mul(x, Add(Tanh(Mul(Add(x, Mul(x^3, 0.044715)), sqrt(2 / pi))), 1)), 0.5),
///   x^3 as Pow(x, 3) or Mul(x, Mul(x, x)) (PyTorch's exporter and GPT-2's NewGELU);
/// operands of every Mul and Add in either order, the 0.5 applied first or last. Every value
/// inside is read only inside the chain; the constants have one element each.
std::optional<Fusion> match_gelu(const Matcher& m, size_t i);

/// The gradient chain whose Erf is node `i`, exactly as Gelu's gradient rule emits it:
///   cdf = Mul(Add(Erf(Mul(x, 1/sqrt 2)), 1), 0.5)
///   pdf = Mul(Exp(Mul(Mul(x, x), -0.5)), 1/sqrt(2 pi))
///   dX  = Mul(dY, Add(cdf, Mul(x, pdf)))
/// as GeluGrad(dY, x) of the rewrite domain: dY * (Phi(x) + x phi(x)), broadcast as the last
/// Mul, in one pass instead of eleven. The values inside are read only inside the chain; the
/// constants have one element each.
std::optional<Fusion> match_erf_gelu_grad(const Matcher& m, size_t i);

/// The gradient chain of GELU's tanh form whose Tanh is node `i`, exactly as Gelu's gradient
/// rule emits it (k = sqrt(2 / pi), a = 0.044715):
///   sq = Mul(x, x);  t = Tanh(Mul(Mul(x, Add(Mul(sq, a), 1)), k))
///   left  = Mul(Add(t, 1), 0.5)
///   right = Mul(Mul(Mul(x, 0.5), Sub(1, Mul(t, t))), Mul(Add(Mul(sq, 3a), 1), k))
///   dX    = Mul(dY, Add(left, right))
/// as GeluGrad(dY, x) with approximate "tanh" of the rewrite domain, in one pass instead of
/// eighteen nodes. sq and t are read only by the chain's two nodes each; every other value inside
/// by one; the constants have one element each.
std::optional<Fusion> match_tanh_gelu_grad(const Matcher& m, size_t i);

}  // namespace dprun
