#pragma once
// GELU in its erf form, 0.5 * x * (1 + erf(x / sqrt 2)), as exporters write it before Gelu-20,
// and its gradient as ops/elementwise/gelu_grad.cpp writes it: found so that each runs as one
// node of the rewrite domain (the backends' op fusion, engine/rewrites/op_fusion.h), and so that
// the gradient builder differentiates the forward chain as one Gelu
// (engine/autograd/gradient_builder.h).
#include <optional>

#include "engine/rewrites/fusion_matcher.h"

namespace dprun {

/// The forward chain whose Erf is node `i`, Mul(Mul(x, Add(Erf(Div(x, sqrt 2)), 1)), 0.5) (Div
/// by sqrt 2 or Mul by 1/sqrt 2, operands in either order, the 0.5 applied first or last), as
/// Gelu(x) of the rewrite domain, named and placed as the chain's last node. Every value inside
/// is read only inside the chain; the constants have one element each.
std::optional<Fusion> match_erf_gelu(const Matcher& m, size_t i);

/// The gradient chain whose Erf is node `i`, exactly as Gelu's gradient rule emits it:
///   cdf = Mul(Add(Erf(Mul(x, 1/sqrt 2)), 1), 0.5)
///   pdf = Mul(Exp(Mul(Mul(x, x), -0.5)), 1/sqrt(2 pi))
///   dX  = Mul(dY, Add(cdf, Mul(x, pdf)))
/// as GeluGrad(dY, x) of the rewrite domain: dY * (Phi(x) + x phi(x)), broadcast as the last
/// Mul, in one pass instead of eleven. The values inside are read only inside the chain; the
/// constants have one element each.
std::optional<Fusion> match_erf_gelu_grad(const Matcher& m, size_t i);

}  // namespace dprun
