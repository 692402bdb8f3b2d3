#pragma once
// The activations a CPU graph rewrite fuses into a node (ops/cpu/fused_activation.h), written
// out in double precision, one per name of FusedActivation::names(): the fused-kernel tests
// loop over those names, so an activation added there without a reference here fails them.
#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <string>

namespace dprun::testing {

/// Reference of each fused activation by attribute name ("" excluded); Clip is [lo, hi].
inline std::map<std::string, std::function<double(double)>> fused_activation_references(double lo,
                                                                                        double hi) {
  return {{"Relu", [](double v) { return std::max(v, 0.0); }},
          {"Clip", [lo, hi](double v) { return std::clamp(v, lo, hi); }},
          {"Sigmoid", [](double v) { return 1 / (1 + std::exp(-v)); }},
          {"Swish", [](double v) { return v / (1 + std::exp(-v)); }},
          {"Gelu", [](double v) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); }}};
}

}  // namespace dprun::testing
