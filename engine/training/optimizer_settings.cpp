#include "engine/training/optimizer_settings.h"

#include <algorithm>

#include "engine/error.h"

namespace dprun {

namespace {

double weight_decay_of(const OptimizerSettings& s) {
  return s.weight_decay.value_or(s.kind == "adamw" ? 0.01 : 0.0);
}

bool names_parameter(const std::string& item, const std::string& name, const Tensor& parameter) {
  if (item == "1d") return parameter.rank() < 2;
  if (item.ends_with('*'))
    return name.starts_with(std::string_view(item).substr(0, item.size() - 1));
  return name == item;
}

/// Which parameters no_weight_decay exempts; empty without it.
std::vector<bool> decay_exemptions(const OptimizerSettings& s, const Trainer& trainer,
                                   OptionSpelling spelling) {
  if (s.no_weight_decay.empty()) return {};
  const std::vector<std::string>& names = trainer.parameter_names();
  const std::vector<Tensor> parameters = trainer.parameters();
  std::vector<bool> exempt(names.size(), false);
  for (const std::string& item : s.no_weight_decay)
    for (size_t i : parameters_named(item, names, parameters, "no-weight-decay", spelling))
      exempt[i] = true;
  return exempt;
}

void check_betas(const OptimizerSettings& s, OptionSpelling spelling) {
  if (!s.betas) return;
  const auto in_range = [](double b) { return b >= 0 && b < 1; };
  if (!std::all_of(s.betas->begin(), s.betas->end(), in_range))
    fail(spell_option("betas", spelling), ": ", s.betas_text, " are not two numbers in [0, 1)");
}

std::unique_ptr<Optimizer> build(const OptimizerSettings& s, std::vector<Tensor> parameters) {
  if (s.kind == "sgd")
    return std::make_unique<Sgd>(std::move(parameters),
                                 SgdOptions{.lr = s.lr,
                                            .momentum = s.momentum.value_or(0),
                                            .weight_decay = weight_decay_of(s),
                                            .nesterov = s.nesterov});
  AdamOptions o{.lr = s.lr, .eps = s.eps.value_or(1e-8)};
  if (s.betas) {
    o.beta1 = (*s.betas)[0];
    o.beta2 = (*s.betas)[1];
  }
  o.decoupled_weight_decay = s.kind == "adamw";
  o.weight_decay = weight_decay_of(s);
  return std::make_unique<Adam>(std::move(parameters), o);
}

}  // namespace

std::string spell_option(std::string_view option, OptionSpelling spelling) {
  if (spelling == OptionSpelling::Flag) return "--" + std::string(option);
  std::string keyword(option);
  std::replace(keyword.begin(), keyword.end(), '-', '_');
  return keyword;
}

std::vector<size_t> parameters_named(const std::string& item, const std::vector<std::string>& names,
                                     const std::vector<Tensor>& parameters, std::string_view option,
                                     OptionSpelling spelling) {
  std::vector<size_t> matched;
  for (size_t i = 0; i < names.size(); ++i)
    if (names_parameter(item, names[i], parameters[i])) matched.push_back(i);
  if (matched.empty())
    fail(spell_option(option, spelling), ": '", item, "' names no trainable parameter");
  return matched;
}

void check_optimizer_options(const OptimizerSettings& s, OptionSpelling spelling) {
  const auto name = [spelling](std::string_view option) { return spell_option(option, spelling); };
  if (s.kind == "sgd") {
    if (s.betas || s.eps) fail(name("betas"), " and ", name("eps"), " are Adam options, not SGD's");
  } else {
    if (s.kind != "adam" && s.kind != "adamw")
      fail(name("optimizer"), " must be sgd, adam or adamw, got '", s.kind, "'");
    if (s.momentum || s.nesterov)
      fail(name("momentum"), " and ", name("nesterov"), " are SGD options, not ", s.kind, "'s");
    check_betas(s, spelling);
  }
  if (!s.no_weight_decay.empty() && weight_decay_of(s) == 0)
    fail(name("no-weight-decay"), " exempts parameters from a weight decay of 0");
}

void check_optimizer_settings(const OptimizerSettings& s, const Trainer& trainer,
                              OptionSpelling spelling) {
  decay_exemptions(s, trainer, spelling);
  check_optimizer_options(s, spelling);
}

std::unique_ptr<Optimizer> make_optimizer(const OptimizerSettings& s, const Trainer& trainer,
                                          OptionSpelling spelling) {
  const std::vector<bool> exempt = decay_exemptions(s, trainer, spelling);
  check_optimizer_options(s, spelling);
  std::unique_ptr<Optimizer> optimizer = build(s, trainer.parameters());
  if (!exempt.empty()) optimizer->exempt_from_weight_decay(exempt);
  return optimizer;
}

std::vector<std::optional<double>> parameter_group_lrs(const OptimizerSettings& s,
                                                       const Trainer& trainer,
                                                       OptionSpelling spelling) {
  if (s.param_lr.empty()) return {};
  const std::vector<std::string>& names = trainer.parameter_names();
  const std::vector<Tensor> parameters = trainer.parameters();
  std::vector<std::optional<double>> lrs(names.size());
  std::vector<std::string> group_of(names.size());
  for (const auto& [pattern, lr] : s.param_lr)
    for (size_t i : parameters_named(pattern, names, parameters, "param-lr", spelling)) {
      if (!group_of[i].empty())
        fail(spell_option("param-lr", spelling), ": '", names[i], "' is in two groups, '",
             group_of[i], "' and '", pattern, "'");
      group_of[i] = pattern;
      lrs[i] = lr;
    }
  return lrs;
}

}  // namespace dprun
