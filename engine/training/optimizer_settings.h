#pragma once
// The optimizer a training run asks for, as `dprun train`'s flags and dprun.Trainer's keywords
// give it: SGD, Adam or AdamW with torch.optim's hyper-parameters and defaults, the parameters
// updated without weight decay and the parameter groups with their own learning rates. Both
// front ends read their text into OptimizerSettings and build from it here, so that they check
// the same things in the same order; the messages name the options as the caller spells them.
//
//   OptimizerSettings s{.kind = "adamw", .lr = 1e-3, .no_weight_decay = {"1d"}};
//   auto optimizer = make_optimizer(s, trainer, OptionSpelling::Keyword);
//   optimizer->set_parameter_lrs(parameter_group_lrs(s, trainer, OptionSpelling::Keyword));
#include <array>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/tensor.h"
#include "engine/training/optimizer.h"
#include "engine/training/trainer.h"

namespace dprun {

/// How messages name an option: as the command line's flag ("--weight-decay") or as the
/// Python keyword ("weight_decay").
enum class OptionSpelling { Flag, Keyword };

/// `option`, given in the flag's words without the dashes ("no-weight-decay"), as `spelling`
/// writes it: "--no-weight-decay" or "no_weight_decay".
std::string spell_option(std::string_view option, OptionSpelling spelling);

/// An optimizer and its hyper-parameters. An unset optional was not given: it takes
/// torch.optim's default, and a setting given to the optimizer that has no use for it is
/// refused (momentum with Adam, betas with SGD).
struct OptimizerSettings {
  std::string kind;                            // sgd | adam | adamw
  double lr = 0;                               // >= 0 (the callers check their numbers)
  std::optional<double> momentum;              // SGD's, default 0
  bool nesterov = false;                       // SGD's
  std::optional<double> weight_decay;          // default 0, and 0.01 for adamw
  std::optional<std::array<double, 2>> betas;  // Adam's, default 0.9, 0.999; each in [0, 1)
  std::string betas_text;                      // the betas as the caller wrote them, for messages
  std::optional<double> eps;                   // Adam's, default 1e-8
  /// Parameters updated without weight decay: names, "PREFIX*" (the names that start with
  /// PREFIX) and "1d" (every parameter of rank below 2: biases, normalization weights).
  std::vector<std::string> no_weight_decay;
  /// Parameter groups with their own lr: (pattern, lr), the patterns as no_weight_decay's
  /// items, the lrs >= 0 (the callers check them with their own wording).
  std::vector<std::pair<std::string, double>> param_lr;
};

/// The indices of the parameters `item` (a no_weight_decay item or a param_lr pattern) names
/// among `names`, `parameters` in the same order. Throws Error "OPTION: 'ITEM' names no
/// trainable parameter" for an item that names none, OPTION spelled from `option` (the flag's
/// words, "param-lr").
std::vector<size_t> parameters_named(const std::string& item, const std::vector<std::string>& names,
                                     const std::vector<Tensor>& parameters, std::string_view option,
                                     OptionSpelling spelling);

/// The checks that need no parameters, in this order: SGD given betas or eps; a kind other than
/// sgd, adam and adamw; Adam given momentum or nesterov; betas outside [0, 1); no_weight_decay
/// with a weight decay of 0. Throws Error naming the options as `spelling` writes them, e.g.
/// "--betas and --eps are Adam options, not SGD's".
void check_optimizer_options(const OptimizerSettings& settings, OptionSpelling spelling);

/// Every check make_optimizer makes, in its order: each no_weight_decay item must name a
/// parameter of `trainer` (parameters_named), then check_optimizer_options.
void check_optimizer_settings(const OptimizerSettings& settings, const Trainer& trainer,
                              OptionSpelling spelling);

/// The optimizer of `settings` over `trainer`'s parameters (parameters() order), with the
/// no_weight_decay parameters exempted. Throws Error as check_optimizer_settings does, and as
/// the optimizer's constructor does when a parameter has no update kernel.
std::unique_ptr<Optimizer> make_optimizer(const OptimizerSettings& settings, const Trainer& trainer,
                                          OptionSpelling spelling);

/// param_lr's learning rates by parameter of `trainer` (unset for those no pattern names), for
/// Optimizer::set_parameter_lrs; empty without param_lr. Throws Error for a pattern that names
/// no parameter (parameters_named) and for a parameter two patterns name ("--param-lr:
/// 'fc1.bias' is in two groups, 'fc1*' and 'fc1.bias'": torch.optim's groups are disjoint).
std::vector<std::optional<double>> parameter_group_lrs(const OptimizerSettings& settings,
                                                       const Trainer& trainer,
                                                       OptionSpelling spelling);

}  // namespace dprun
