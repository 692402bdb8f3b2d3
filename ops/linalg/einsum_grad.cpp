// Einsum: Y is a sum of products, linear in each operand, so operand i's gradient is another
// Einsum: dY contracted with the other operands, written to operand i's subscripts
// ("bij,bjk->bik" gives dA = "bik,bjk->bij" of dY and B, dB = "bik,bij->bjk" of dY and A).
//
// A letter of operand i found in neither the output nor another operand was summed out of
// operand i alone: the gradient Einsum cannot name it, so the result gets that axis back by
// Unsqueeze and Expand to X_i's shape (d/dX_i of the sum is dY, for every value of the letter).
// "..." broadcasts numpy-style across operands; the gradient Einsum gives the broadcast
// ellipsis axes (Y's) and the result is summed back to X_i's shape, over axes decided from the
// shapes of Y and X_i where they are known (at any opset), else at run time (opset 13).
// Refused: a letter repeated within a term (a diagonal or trace) and "..." anywhere but at the
// start of a term.
#include <algorithm>
#include <cstddef>

#include "ops/grad/grad_util.h"

namespace dprun {
namespace {

struct Term {
  bool ellipsis = false;
  std::string letters;  // after the leading "..." when there is one
};

struct Equation {
  std::vector<Term> inputs;
  Term output;
};

Term parse_term(GradientContext& ctx, const std::string& s) {
  Term t;
  std::string rest = s;
  if (rest.compare(0, 3, "...") == 0) {
    t.ellipsis = true;
    rest = rest.substr(3);
  }
  if (rest.find('.') != std::string::npos)
    ctx.fail("'...' only at the start of a term is supported, got '", s, "'");
  for (char c : rest)
    if (std::count(rest.begin(), rest.end(), c) > 1)
      ctx.fail("the letter '", c, "' repeats within '", s, "' (diagonals are not supported)");
  t.letters = rest;
  return t;
}

// The implicit output: "..." when any input has it, then the letters used once, in character
// code order (as the kernel and numpy).
Term implicit_output(const std::vector<Term>& inputs) {
  Term out;
  std::string all;
  for (const Term& t : inputs) {
    out.ellipsis = out.ellipsis || t.ellipsis;
    all += t.letters;
  }
  std::sort(all.begin(), all.end());
  for (char c : all)
    if (std::count(all.begin(), all.end(), c) == 1) out.letters += c;
  return out;
}

Equation parse_equation(GradientContext& ctx) {
  std::string eq;
  for (char c : ctx.node().attr_string("equation"))
    if (c != ' ') eq += c;
  size_t arrow = eq.find("->");
  std::string lhs = eq.substr(0, arrow);
  Equation e;
  for (size_t start = 0;;) {
    size_t comma = lhs.find(',', start);
    e.inputs.push_back(parse_term(ctx, lhs.substr(start, comma - start)));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  e.output = arrow == std::string::npos ? implicit_output(e.inputs)
                                        : parse_term(ctx, eq.substr(arrow + 2));
  bool any_ellipsis = false;
  for (const Term& t : e.inputs) any_ellipsis = any_ellipsis || t.ellipsis;
  if (any_ellipsis && !e.output.ellipsis) ctx.fail("the inputs use '...' and the output does not");
  return e;
}

// (Appends rather than operator+ on a literal: GCC 12 warns falsely of overlapping copies.)
std::string spelled(const Term& t) {
  std::string s = t.ellipsis ? "..." : "";
  s.append(t.letters);
  return s;
}

// The shape of `v` as far as it is known: a constant's, or the declared or inferred one.
std::optional<SymbolicShape> shape_of(GradientContext& ctx, const std::string& v) {
  if (auto c = ctx.constant_value(v)) {
    SymbolicShape s;
    for (int64_t d : c->shape()) s.push_back(Dim::known(d));
    return s;
  }
  if (auto t = ctx.type_of(v); t && t->shape) return t->shape;
  return std::nullopt;
}

// The shape of operand i's gradient before it is summed back: Y's ellipsis axes (the
// operands' broadcast together, as the gradient Einsum gives them), then X_i's letters.
std::optional<SymbolicShape> ellipsis_grad_shape(GradientContext& ctx, const Equation& e,
                                                 size_t i) {
  auto y = shape_of(ctx, ctx.O(0)), x = shape_of(ctx, ctx.I(i));
  const size_t y_letters = e.output.letters.size(), x_letters = e.inputs[i].letters.size();
  if (!y || !x || y->size() < y_letters || x->size() < x_letters) return std::nullopt;
  SymbolicShape g(y->begin(), y->begin() + static_cast<std::ptrdiff_t>(y->size() - y_letters));
  g.insert(g.end(), x->begin() + static_cast<std::ptrdiff_t>(x->size() - x_letters), x->end());
  return g;
}

void operand_grad(GradientContext& ctx, const Equation& e, size_t i) {
  // dY and every other operand, with their terms.
  std::vector<std::string> values{ctx.GO(0)};
  std::string lhs = spelled(e.output), named = e.output.letters;
  bool ellipsis = e.output.ellipsis;
  for (size_t j = 0; j < e.inputs.size(); ++j) {
    if (j == i) continue;
    values.push_back(ctx.I(j));
    lhs.append(",").append(spelled(e.inputs[j]));
    named += e.inputs[j].letters;
  }
  const std::string& own = e.inputs[i].letters;
  std::string kept;
  std::vector<int64_t> summed_out;  // negative axes: the letters follow any ellipsis axes
  for (size_t p = 0; p < own.size(); ++p) {
    if (named.find(own[p]) != std::string::npos)
      kept += own[p];
    else
      summed_out.push_back(static_cast<int64_t>(p) - static_cast<int64_t>(own.size()));
  }
  std::string g =
      ctx.emit("Einsum", values,
               {{"equation", Attribute::of_string(lhs + "->" + (ellipsis ? "..." : "") + kept)}});
  std::string x_dims = ctx.emit("Shape", {ctx.I(i)});
  if (!summed_out.empty()) g = ctx.emit("Expand", {ctx.unsqueeze(g, summed_out), x_dims});
  if (ellipsis) g = ctx.reduce_to_shape_of(g, ellipsis_grad_shape(ctx, e, i), ctx.I(i));
  ctx.set_GI(i, g);
}

void einsum_grad(GradientContext& ctx) {
  Equation e = parse_equation(ctx);
  if (e.inputs.size() != ctx.input_count())
    ctx.fail("the equation has ", e.inputs.size(), " operands and the node ", ctx.input_count(),
             " inputs");
  for (size_t i = 0; i < e.inputs.size(); ++i)
    if (ctx.wants_GI(i)) operand_grad(ctx, e, i);
}

DPRUN_REGISTER_GRADIENT({.op_type = "Einsum", .since = 12, .rule = einsum_grad});

}  // namespace
}  // namespace dprun
