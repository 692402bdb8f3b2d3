#include "engine/training/run_settings.h"

#include <algorithm>
#include <charconv>

namespace dprun {

namespace {

std::string number_text(double v) {
  char text[64];
  const auto end = std::to_chars(text, text + sizeof text, v).ptr;  // shortest exact form
  return std::string(text, end);
}

std::string list_text(std::vector<std::string> items) {
  if (items.empty()) return "none";
  std::sort(items.begin(), items.end());
  std::string text;
  for (const auto& item : items) text += (text.empty() ? "" : ",") + item;
  return text;
}

RunSetting flag(const char* option, bool on) {
  return {option, on ? "yes" : "no", true};
}

// The optimizer's kind and hyper-parameters (the lr left out: see run_settings).
void add_optimizer_settings(std::vector<RunSetting>& s, const Optimizer& optimizer,
                            const std::vector<std::string>& names) {
  double weight_decay = 0;
  if (const auto* sgd = dynamic_cast<const Sgd*>(&optimizer)) {
    const SgdOptions& o = sgd->options();
    s.push_back({"optimizer", "sgd"});
    s.push_back({"momentum", number_text(o.momentum)});
    s.push_back(flag("nesterov", o.nesterov));
    weight_decay = o.weight_decay;
  } else if (const auto* adam = dynamic_cast<const Adam*>(&optimizer)) {
    const AdamOptions& o = adam->options();
    s.push_back({"optimizer", o.decoupled_weight_decay ? "adamw" : "adam"});
    s.push_back({"betas", number_text(o.beta1) + "," + number_text(o.beta2)});
    s.push_back({"eps", number_text(o.eps)});
    weight_decay = o.weight_decay;
  } else {
    fail("checkpoint: an optimizer of a kind dprun train does not make");
  }
  s.push_back({"weight-decay", number_text(weight_decay)});
  std::vector<std::string> exempt;
  const std::vector<bool>& exemptions = optimizer.decay_exemptions();
  for (size_t i = 0; i < exemptions.size() && i < names.size(); ++i)
    if (exemptions[i]) exempt.push_back(names[i]);
  s.push_back({"no-weight-decay", list_text(exempt)});
}

void add_loss_settings(std::vector<RunSetting>& s, const LossSpec& loss, const Model& model) {
  s.push_back({"loss", loss_kind_name(loss.kind)});
  const auto& outputs = model.graph().outputs;
  s.push_back({"output", !loss.output.empty() ? loss.output
                         : outputs.empty()    ? "none"
                                              : outputs[0].name});
  if (loss.kind != LossKind::CrossEntropy && loss.kind != LossKind::Nll) return;
  s.push_back({"class-dim", std::to_string(loss.class_dim)});
  s.push_back({"ignore-index",
               loss.ignore_index ? std::to_string(*loss.ignore_index) : std::string("none")});
  if (loss.kind == LossKind::CrossEntropy)
    s.push_back({"label-smoothing", number_text(loss.label_smoothing)});
}

}  // namespace

std::vector<RunSetting> run_settings(const TrainerOptions& options, const Model& model,
                                     const Trainer& trainer, const Optimizer& optimizer,
                                     int64_t batch, int64_t accumulate, bool shuffle) {
  std::vector<RunSetting> s;
  s.push_back({"precision", std::string(dtype_name(options.training.precision))});
  s.push_back({"batch", std::to_string(batch)});
  s.push_back({"accumulate", std::to_string(accumulate)});
  add_loss_settings(s, options.training.loss, model);
  add_optimizer_settings(s, optimizer, trainer.parameter_names());
  s.push_back(
      {"clip-grad-norm", options.max_grad_norm > 0 ? number_text(options.max_grad_norm) : "none"});
  if (options.training.precision == DType::Float16)
    s.push_back(
        {"loss-scale-growth-interval", std::to_string(options.loss_scaling.growth_interval)});
  s.push_back({"freeze", list_text(options.training.freeze)});
  s.push_back(flag("shuffle", shuffle));
  s.push_back(flag("sync-batchnorm", options.training.sync_batch_norm));
  return s;
}

}  // namespace dprun

namespace dprun {

std::vector<RunSetting> transform_settings(
    const std::map<std::string, InputTransform>& transforms) {
  std::vector<RunSetting> s = {{"layout", ""}, {"normalize", ""}, {"augment", ""}};
  for (const auto& [name, t] : transforms)
    for (auto [setting, text] :
         {std::pair{&s[0], &t.layout_text}, std::pair{&s[1], &t.normalize_text},
          std::pair{&s[2], &t.augment_text}})
      if (!text->empty())
        setting->value += (setting->value.empty() ? "" : ";") + name + "=" + *text;
  for (RunSetting& setting : s)
    if (setting.value.empty()) setting.value = "none";
  return s;
}

}  // namespace dprun
