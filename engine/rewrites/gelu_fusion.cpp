#include "engine/rewrites/gelu_fusion.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

namespace dprun {

namespace {

// The argument of GELU's erf, x / sqrt(2) or x * (1 / sqrt(2)) with the operands in either order:
// x and the scaling node.
std::optional<std::pair<std::string, std::vector<size_t>>> erf_argument(const Matcher& m,
                                                                        const std::string& arg) {
  const Graph& g = m.graph();
  if (auto div = m.producer(arg, "Div")) {
    const Node& d = g.nodes[*div];
    if (d.inputs.size() == 2 && m.is_constant_near(d.inputs[1], std::sqrt(2.0)))
      return std::make_pair(d.inputs[0], std::vector<size_t>{*div});
  } else if (auto mul = m.producer(arg, "Mul")) {
    for (size_t k = 0; k < 2; ++k) {
      auto other = m.other_operand(*mul, g.nodes[*mul].inputs[k]);
      if (other && m.is_constant_near(g.nodes[*mul].inputs[k], std::sqrt(0.5)))
        return std::make_pair(*other, std::vector<size_t>{*mul});
    }
  }
  return std::nullopt;
}

// The other operand of the binary `op` producing `value` (read only by `reader`) when one operand
// is a one-element constant near `c`; the node joins `chain`.
std::optional<std::string> operand_beside_constant(const Matcher& m, const std::string& value,
                                                   const char* op, double c, size_t reader,
                                                   std::vector<size_t>& chain) {
  auto node = m.producer(value, op);
  if (!node || m.only_reader(value) != reader) return std::nullopt;
  const Node& n = m.graph().nodes[*node];
  for (size_t k = 0; k < 2 && n.inputs.size() == 2; ++k)
    if (m.is_constant_near(n.inputs[k], c)) {
      auto other = m.other_operand(*node, n.inputs[k]);
      if (!other) return std::nullopt;
      chain.push_back(*node);
      return other;
    }
  return std::nullopt;
}

// True when `cube` is x^3, read only by `reader`: Pow(x, 3), or x * (x * x) with the operands of
// either product in either order.
bool is_cube_of(const Matcher& m, const std::string& cube, const std::string& x, size_t reader,
                std::vector<size_t>& chain) {
  const Graph& g = m.graph();
  if (m.only_reader(cube) != reader) return false;
  if (auto pow = m.producer(cube, "Pow")) {
    const Node& p = g.nodes[*pow];
    if (p.inputs.size() != 2 || p.inputs[0] != x || !m.is_constant_near(p.inputs[1], 3.0))
      return false;
    chain.push_back(*pow);
    return true;
  }
  auto outer = m.producer(cube, "Mul");
  auto square = outer ? m.other_operand(*outer, x) : std::nullopt;
  auto inner = square ? m.producer(*square, "Mul") : std::nullopt;
  if (!inner || m.only_reader(*square) != outer ||
      g.nodes[*inner].inputs != std::vector<std::string>{x, x})
    return false;
  chain.insert(chain.end(), {*inner, *outer});
  return true;
}

// The argument of GELU's tanh, sqrt(2 / pi) * (x + 0.044715 * x^3) with the operands of each
// product and of the sum in either order: x and the nodes computing it.
std::optional<std::pair<std::string, std::vector<size_t>>> tanh_argument(const Matcher& m,
                                                                         const std::string& arg,
                                                                         size_t tanh) {
  const Graph& g = m.graph();
  std::vector<size_t> chain;
  auto sum = operand_beside_constant(m, arg, "Mul", 0.7978845608028654, tanh, chain);
  auto add = sum ? m.producer(*sum, "Add") : std::nullopt;
  if (!add || m.only_reader(*sum) != chain.back() || g.nodes[*add].inputs.size() != 2)
    return std::nullopt;
  chain.push_back(*add);
  for (size_t k = 0; k < 2; ++k) {
    const std::string& x = g.nodes[*add].inputs[k];
    auto x_term = m.other_operand(*add, x);
    std::vector<size_t> term_chain = chain;
    auto cube = x_term ? operand_beside_constant(m, *x_term, "Mul", 0.044715, *add, term_chain)
                       : std::nullopt;
    if (cube && is_cube_of(m, *cube, x, term_chain.back(), term_chain))
      return std::make_pair(x, term_chain);
  }
  return std::nullopt;
}

}  // namespace

std::optional<Fusion> match_gelu(const Matcher& m, size_t i) {
  const Graph& g = m.graph();
  const Node& f = g.nodes[i];
  const bool tanh = f.op_type == "Tanh";
  if (!f.domain.empty() || (!tanh && f.op_type != "Erf") || f.inputs.size() != 1 ||
      f.outputs.size() != 1 || !m.only_reader(f.inputs[0]))
    return std::nullopt;
  const auto argument = tanh ? tanh_argument(m, f.inputs[0], i) : erf_argument(m, f.inputs[0]);
  if (!argument) return std::nullopt;
  const std::string& x = argument->first;
  std::vector<size_t> chain = argument->second;
  chain.push_back(i);
  // 1 + erf(.) or 1 + tanh(.)
  auto plus_one = m.only_reader(f.outputs[0], "Add");
  if (!plus_one) return std::nullopt;
  auto one = m.other_operand(*plus_one, f.outputs[0]);
  if (!one || !m.is_constant_near(*one, 1.0)) return std::nullopt;
  chain.push_back(*plus_one);
  const std::string& bracket = g.nodes[*plus_one].outputs[0];
  auto times = m.only_reader(bracket, "Mul");
  if (!times) return std::nullopt;
  auto factor = m.other_operand(*times, bracket);
  if (!factor) return std::nullopt;
  auto gelu = [&](const Node& last) {
    Node n = fused_node(last, "Gelu", {x});
    if (tanh) n.attributes["approximate"] = Attribute::of_string("tanh");
    return n;
  };
  if (*factor == x) {  // (x * bracket) * 0.5
    auto half_mul = m.only_reader(g.nodes[*times].outputs[0], "Mul");
    if (!half_mul) return std::nullopt;
    auto half = m.other_operand(*half_mul, g.nodes[*times].outputs[0]);
    if (!half || !m.is_constant_near(*half, 0.5)) return std::nullopt;
    chain.insert(chain.end(), {*times, *half_mul});
    return Fusion{chain, gelu(g.nodes[*half_mul])};
  }
  // (x * 0.5) * bracket: the halving Mul reads x, and only `times` reads its result.
  auto half_mul = m.producer(*factor, "Mul");
  if (!half_mul || !m.only_reader(*factor, "Mul")) return std::nullopt;
  auto half = m.other_operand(*half_mul, x);
  if (!half || !m.is_constant_near(*half, 0.5)) return std::nullopt;
  chain.insert(chain.end(), {*half_mul, *times});
  return Fusion{chain, gelu(g.nodes[*times])};
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

namespace {

constexpr double kSqrt2OverPi = 0.7978845608028654;  // sqrt(2 / pi)
constexpr double kTanhCube = 0.044715;

// Whether `n` is a plain ai.onnx `op` node with one output.
bool plain(const Node& n, const char* op) {
  return n.domain.empty() && n.op_type == op && n.outputs.size() == 1;
}

// Whether `value`'s readers are exactly the nodes `want` (in any order).
bool read_exactly_by(const Matcher& m, const std::string& value, std::vector<size_t> want) {
  std::vector<size_t> readers = m.readers(value);
  std::sort(readers.begin(), readers.end());
  std::sort(want.begin(), want.end());
  return readers == want && !is_graph_result(m.graph(), value);
}

}  // namespace

std::optional<Fusion> match_tanh_gelu_grad(const Matcher& m, size_t i) {
  const Graph& g = m.graph();
  const Node& tanh = g.nodes[i];
  if (tanh.inputs.size() != 1 || tanh.outputs.size() != 1) return std::nullopt;
  std::vector<size_t> chain = {i};
  // t = tanh(((x * ((x * x) * a + 1)) * k)
  auto xi = operand_beside_constant(m, tanh.inputs[0], "Mul", kSqrt2OverPi, i, chain);
  auto n_xi = xi ? m.producer(*xi, "Mul") : std::nullopt;
  if (!n_xi || m.only_reader(*xi) != chain.back()) return std::nullopt;
  chain.push_back(*n_xi);
  const std::string& x = g.nodes[*n_xi].inputs[0];
  auto sa = operand_beside_constant(m, g.nodes[*n_xi].inputs[1], "Add", 1.0, *n_xi, chain);
  auto squared =
      sa ? operand_beside_constant(m, *sa, "Mul", kTanhCube, chain.back(), chain) : std::nullopt;
  auto n_squared = squared ? m.producer(*squared, "Mul") : std::nullopt;
  if (!n_squared || g.nodes[*n_squared].inputs != std::vector<std::string>{x, x})
    return std::nullopt;
  const size_t n_sa = chain.back();
  chain.push_back(*n_squared);
  // left = (t + 1) * 0.5; sech2 = 1 - t * t
  const std::string& t = tanh.outputs[0];
  std::optional<size_t> plus_one, t_squared;
  for (size_t r : m.readers(t)) {
    const Node& n = g.nodes[r];
    if (plain(n, "Add") && n.inputs.size() == 2 && n.inputs[0] == t &&
        m.is_constant_near(n.inputs[1], 1.0))
      plus_one = r;
    else if (plain(n, "Mul") && n.inputs == std::vector<std::string>{t, t})
      t_squared = r;
  }
  if (!plus_one || !t_squared || !read_exactly_by(m, t, {*plus_one, *t_squared}))
    return std::nullopt;
  auto left = times_constant(m, out(g, *plus_one), "Mul", 0.5);
  auto sech2 = m.only_reader(out(g, *t_squared), "Sub");
  if (!left || g.nodes[*left].inputs[0] != out(g, *plus_one) || !sech2 ||
      g.nodes[*sech2].inputs[1] != out(g, *t_squared) ||
      !m.is_constant_near(g.nodes[*sech2].inputs[0], 1.0))
    return std::nullopt;
  chain.insert(chain.end(), {*plus_one, *left, *t_squared, *sech2});
  // right = ((x * 0.5) * sech2) * (((x * x) * 3a + 1) * k)
  auto scaled = m.only_reader(out(g, *sech2), "Mul");
  if (!scaled || g.nodes[*scaled].inputs[1] != out(g, *sech2)) return std::nullopt;
  chain.push_back(*scaled);
  auto half_x = operand_beside_constant(m, g.nodes[*scaled].inputs[0], "Mul", 0.5, *scaled, chain);
  if (!half_x || *half_x != x) return std::nullopt;
  auto right = m.only_reader(out(g, *scaled), "Mul");
  if (!right || g.nodes[*right].inputs[0] != out(g, *scaled)) return std::nullopt;
  chain.push_back(*right);
  auto s3p =
      operand_beside_constant(m, g.nodes[*right].inputs[1], "Mul", kSqrt2OverPi, *right, chain);
  auto s3 = s3p ? operand_beside_constant(m, *s3p, "Add", 1.0, chain.back(), chain) : std::nullopt;
  auto squared_again =
      s3 ? operand_beside_constant(m, *s3, "Mul", 3 * kTanhCube, chain.back(), chain)
         : std::nullopt;
  if (!squared_again || *squared_again != *squared ||
      !read_exactly_by(m, *squared, {n_sa, chain.back()}))
    return std::nullopt;
  // dX = dY * (left + right)
  auto sum = m.only_reader(out(g, *left), "Add");
  if (!sum || g.nodes[*sum].inputs != std::vector<std::string>{out(g, *left), out(g, *right)} ||
      m.only_reader(out(g, *right)) != *sum)
    return std::nullopt;
  auto dx = m.only_reader(out(g, *sum), "Mul");
  if (!dx || g.nodes[*dx].inputs.size() != 2 || g.nodes[*dx].inputs[1] != out(g, *sum))
    return std::nullopt;
  chain.insert(chain.end(), {*sum, *dx});
  Node fused = fused_node(g.nodes[*dx], "GeluGrad", {g.nodes[*dx].inputs[0], x});
  fused.attributes["approximate"] = Attribute::of_string("tanh");
  return Fusion{std::move(chain), std::move(fused)};
}

}  // namespace dprun
