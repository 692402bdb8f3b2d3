#include "engine/rewrites/gelu_fusion.h"

#include <cmath>
#include <string>
#include <vector>

namespace dprun {

std::optional<Fusion> match_erf_gelu(const Matcher& m, size_t i) {
  const Graph& g = m.graph();
  const std::string& scaled = g.nodes[i].inputs[0];
  if (g.nodes[i].inputs.size() != 1 || !m.only_reader(scaled, "Erf")) return std::nullopt;
  // x / sqrt(2), or x * (1 / sqrt(2)) with the operands in either order.
  std::optional<std::string> x;
  size_t scale = 0;
  if (auto div = m.producer(scaled, "Div")) {
    const Node& d = g.nodes[*div];
    if (d.inputs.size() == 2 && m.is_constant_near(d.inputs[1], std::sqrt(2.0))) x = d.inputs[0];
    scale = *div;
  } else if (auto mul = m.producer(scaled, "Mul")) {
    for (size_t k = 0; k < 2 && !x; ++k) {
      auto other = m.other_operand(*mul, g.nodes[*mul].inputs[k]);
      if (other && m.is_constant_near(g.nodes[*mul].inputs[k], std::sqrt(0.5))) x = other;
    }
    scale = *mul;
  }
  if (!x) return std::nullopt;
  // 1 + erf(.)
  auto plus_one = m.only_reader(g.nodes[i].outputs[0], "Add");
  if (!plus_one) return std::nullopt;
  auto one = m.other_operand(*plus_one, g.nodes[i].outputs[0]);
  if (!one || !m.is_constant_near(*one, 1.0)) return std::nullopt;
  const std::string& bracket = g.nodes[*plus_one].outputs[0];
  auto times = m.only_reader(bracket, "Mul");
  if (!times) return std::nullopt;
  auto factor = m.other_operand(*times, bracket);
  if (!factor) return std::nullopt;
  if (*factor == *x) {  // (x * bracket) * 0.5
    auto half_mul = m.only_reader(g.nodes[*times].outputs[0], "Mul");
    if (!half_mul) return std::nullopt;
    auto half = m.other_operand(*half_mul, g.nodes[*times].outputs[0]);
    if (!half || !m.is_constant_near(*half, 0.5)) return std::nullopt;
    return Fusion{{scale, i, *plus_one, *times, *half_mul},
                  fused_node(g.nodes[*half_mul], "Gelu", {*x})};
  }
  // (x * 0.5) * bracket: the halving Mul reads x, and only `times` reads its result.
  auto half_mul = m.producer(*factor, "Mul");
  if (!half_mul || !m.only_reader(*factor, "Mul")) return std::nullopt;
  auto half = m.other_operand(*half_mul, *x);
  if (!half || !m.is_constant_near(*half, 0.5)) return std::nullopt;
  return Fusion{{scale, *half_mul, i, *plus_one, *times},
                fused_node(g.nodes[*times], "Gelu", {*x})};
}

namespace {

constexpr double kInvSqrt2Pi = 0.3989422804014327;  // 1 / sqrt(2 pi)

// The node reading `value` alone, a binary `op` whose other operand is a constant near `c`.
std::optional<size_t> times_constant(const Matcher& m, const std::string& value, const char* op,
                                     double c) {
  auto reader = m.only_reader(value, op);
  if (!reader) return std::nullopt;
  auto other = m.other_operand(*reader, value);
  if (!other || !m.is_constant_near(*other, c)) return std::nullopt;
  return reader;
}

const std::string& out(const Graph& g, size_t k) {
  return g.nodes[k].outputs[0];
}

}  // namespace

std::optional<Fusion> match_erf_gelu_grad(const Matcher& m, size_t i) {
  const Graph& g = m.graph();
  const Node& erf = g.nodes[i];
  if (erf.inputs.size() != 1 || erf.outputs.size() != 1) return std::nullopt;
  // cdf = (erf(x * (1 / sqrt 2)) + 1) * 0.5
  auto scale = m.producer(erf.inputs[0], "Mul");
  if (!scale || !m.only_reader(erf.inputs[0])) return std::nullopt;
  const std::string& x = g.nodes[*scale].inputs[0];
  if (!m.is_constant_near(g.nodes[*scale].inputs[1], std::sqrt(0.5))) return std::nullopt;
  auto plus_one = times_constant(m, out(g, i), "Add", 1.0);
  auto cdf = plus_one ? times_constant(m, out(g, *plus_one), "Mul", 0.5) : std::nullopt;
  // d = cdf + x * pdf, read by dX = dY * d alone.
  auto sum = cdf ? m.only_reader(out(g, *cdf), "Add") : std::nullopt;
  if (!sum || g.nodes[*sum].inputs[0] != out(g, *cdf)) return std::nullopt;
  const std::string& x_pdf = g.nodes[*sum].inputs[1];
  auto times_x = m.producer(x_pdf, "Mul");
  if (!times_x || !m.only_reader(x_pdf) || g.nodes[*times_x].inputs[0] != x) return std::nullopt;
  // pdf = exp((x * x) * -0.5) * (1 / sqrt(2 pi))
  const std::string& pdf = g.nodes[*times_x].inputs[1];
  auto pdf_scale = m.producer(pdf, "Mul");
  if (!pdf_scale || !m.only_reader(pdf) ||
      !m.is_constant_near(g.nodes[*pdf_scale].inputs[1], kInvSqrt2Pi))
    return std::nullopt;
  auto exp = m.producer(g.nodes[*pdf_scale].inputs[0], "Exp");
  if (!exp || !m.only_reader(out(g, *exp))) return std::nullopt;
  const std::string& exponent = g.nodes[*exp].inputs[0];
  auto halve = m.producer(exponent, "Mul");
  if (!halve || !m.only_reader(exponent) || !m.is_constant_near(g.nodes[*halve].inputs[1], -0.5))
    return std::nullopt;
  const std::string& squared = g.nodes[*halve].inputs[0];
  auto x_squared = m.producer(squared, "Mul");
  if (!x_squared || !m.only_reader(squared) ||
      g.nodes[*x_squared].inputs != std::vector<std::string>{x, x})
    return std::nullopt;
  auto dx = m.only_reader(out(g, *sum), "Mul");
  if (!dx || g.nodes[*dx].inputs.size() != 2 || g.nodes[*dx].inputs[1] != out(g, *sum))
    return std::nullopt;
  return Fusion{
      {*scale, i, *plus_one, *cdf, *x_squared, *halve, *exp, *pdf_scale, *times_x, *sum, *dx},
      fused_node(g.nodes[*dx], "GeluGrad", {g.nodes[*dx].inputs[0], x})};
}

}  // namespace dprun
