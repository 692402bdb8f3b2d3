#include "tools/train_checkpoint.h"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <system_error>

#include "loader/onnx_loader.h"
#include "tools/checkpoint_checksum.h"

namespace dprun::cli {

namespace {

constexpr char kStatePrefix[] = "dprun.state.";
constexpr char kStep[] = "step";
constexpr char kOptimizerSteps[] = "optimizer.steps";
constexpr char kOptimizerPrefix[] = "optimizer.";
constexpr char kLossScale[] = "loss_scale";
constexpr char kGrowthTracker[] = "loss_scale.growth_tracker";
constexpr char kSkippedSteps[] = "loss_scale.skipped_steps";
constexpr char kSeed[] = "seed";
constexpr char kSettingPrefix[] = "run.";
// The checksum's entry, under kStatePrefix.
const std::string kChecksum = std::string(kCheckpointChecksum).substr(sizeof kStatePrefix - 1);

Tensor int64_scalar(int64_t v) {
  return Tensor::scalar<int64_t>(v);
}

Tensor text_tensor(const std::string& text) {
  return Tensor::from_vector<uint8_t>({static_cast<int64_t>(text.size())},
                                      std::vector<uint8_t>(text.begin(), text.end()));
}

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

// "optimizer.<kind>.<index>" of Optimizer::State as the checkpoint names it, by parameter:
// "optimizer.<kind>.<parameter name>".
std::string buffer_entry(const std::string& buffer, const std::vector<std::string>& names) {
  const size_t dot = buffer.rfind('.');
  const size_t i = std::stoul(buffer.substr(dot + 1));
  DPRUN_CHECK(i < names.size(), "checkpoint: optimizer buffer '", buffer, "' of ", names.size(),
              " parameters");
  return kOptimizerPrefix + buffer.substr(0, dot + 1) + names[i];
}

std::map<std::string, Tensor> training_state(const CheckpointedRun& run, int64_t step) {
  std::map<std::string, Tensor> state;
  state[kStep] = int64_scalar(step);
  state[kSeed] = int64_scalar(static_cast<int64_t>(run.seed));
  const Optimizer::State o = run.optimizer.state();
  state[kOptimizerSteps] = int64_scalar(o.steps);
  for (const auto& [name, buffer] : o.buffers)
    state[buffer_entry(name, run.parameter_names)] = buffer.to(Device::cpu());
  if (run.scaler) {
    state[kLossScale] = Tensor::scalar<float>(run.scaler->scale());
    state[kGrowthTracker] = int64_scalar(run.scaler->growth_tracker());
    state[kSkippedSteps] = int64_scalar(run.scaler->skipped_steps());
  }
  for (const RunSetting& setting : run.settings)
    state[kSettingPrefix + setting.option] = text_tensor(setting.value);
  return state;
}

// "float32[5, 12]": a tensor's type without its device.
std::string type_text(const Tensor& t) {
  return std::string(dtype_name(t.dtype())) + shape_to_string(t.shape());
}

bool starts_with(const std::string& text, const std::string& prefix) {
  return text.rfind(prefix, 0) == 0;
}

// The checks of restore_training_state, each throwing Error with what does not fit (the
// caller names the file).
class StateReader {
 public:
  StateReader(const Checkpoint& checkpoint, const CheckpointedRun& run)
      : state_(checkpoint.state), checksum_(checkpoint.checksum), run_(run) {}

  int64_t restore() {
    check_entries_known();
    check_checksum();
    for (const RunSetting& setting : run_.settings) check_setting(setting);
    const auto saved_seed = static_cast<uint64_t>(int64_of(kSeed));
    DPRUN_CHECK(saved_seed == run_.seed, "was trained with --seed ", saved_seed,
                ": resume with the same --seed (it orders the data and draws the Dropout masks)");
    // --precision matched: a float16 run's checkpoint has its scale, unless damaged.
    DPRUN_CHECK(!run_.scaler || state_.count(kLossScale), "has no '", entry(kLossScale),
                "' for its float16 training: the checkpoint is damaged");
    const int64_t step = checked_step();
    Optimizer::State o{.steps = int64_of(kOptimizerSteps), .buffers = buffers()};
    run_.optimizer.load_state(o);
    if (run_.scaler)
      run_.scaler->restore(state_.at(kLossScale).data<float>()[0], int64_of(kGrowthTracker),
                           int64_of(kSkippedSteps));
    return step;
  }

 private:
  static std::string entry(const std::string& name) { return kStatePrefix + name; }

  int64_t int64_of(const std::string& name) const {
    auto it = state_.find(name);
    DPRUN_CHECK(it != state_.end(), "has no '", entry(name), "': the checkpoint is damaged");
    DPRUN_CHECK(it->second.dtype() == DType::Int64 && it->second.numel() == 1, "its '", entry(name),
                "' is ", type_text(it->second), ", not one int64: the checkpoint is damaged");
    return it->second.data<int64_t>()[0];
  }

  // Every entry is one this dprun writes, of its kind (so that the checks below read them
  // safely), and the float16 state comes with float16 training only.
  void check_entries_known() const {
    for (const char* name : {kStep, kSeed, kOptimizerSteps}) int64_of(name);
    int64_of(kChecksum);
    if (auto it = state_.find(kLossScale); it != state_.end()) {
      for (const char* name : {kGrowthTracker, kSkippedSteps}) int64_of(name);
      DPRUN_CHECK(it->second.dtype() == DType::Float32 && it->second.numel() == 1, "its '",
                  entry(kLossScale), "' is ", type_text(it->second),
                  ", not one float32: the checkpoint is damaged");
    }
    for (const auto& [name, value] : state_) {
      const bool known =
          name == kStep || name == kSeed || name == kOptimizerSteps || name == kChecksum ||
          name == kLossScale || name == kGrowthTracker || name == kSkippedSteps ||
          starts_with(name, kOptimizerPrefix) ||
          (starts_with(name, kSettingPrefix) && value.dtype() == DType::UInt8 && value.rank() == 1);
      DPRUN_CHECK(known, "holds '", entry(name),
                  "', which this dprun does not write: the checkpoint is damaged or from another "
                  "version");
    }
  }

  void check_checksum() const {
    DPRUN_CHECK(static_cast<uint64_t>(int64_of(kChecksum)) == checksum_,
                "its contents do not match its checksum: the checkpoint is damaged");
  }

  void check_setting(const RunSetting& setting) const {
    auto it = state_.find(kSettingPrefix + setting.option);
    DPRUN_CHECK(it != state_.end(), "has no '", entry(kSettingPrefix + setting.option),
                "': it was written by an older dprun or is damaged");
    const auto* bytes = it->second.data<uint8_t>();
    const std::string saved(bytes, bytes + it->second.numel());
    if (saved == setting.value) return;
    const std::string& o = setting.option;
    if (setting.flag)
      fail(saved == "yes" ? "was trained with --" + o + "; resume with --" + o + " too"
                          : "was trained without --" + o + "; resume without it");
    fail("was trained with --", o, " ", saved, "; resume with the same --", o, " (got ",
         setting.value, ")");
  }

  // The run's step, and the optimizer's steps and the scaler's skipped ones that follow from
  // it: every step updates once unless float16 training skipped it.
  int64_t checked_step() const {
    const int64_t step = int64_of(kStep);
    DPRUN_CHECK(step >= 0, "the state's step is ", step, ": the checkpoint is damaged");
    const int64_t skipped = run_.scaler ? int64_of(kSkippedSteps) : 0;
    DPRUN_CHECK(skipped >= 0 && skipped <= step, "the state's ", skipped,
                " skipped steps do not fit its step ", step, ": the checkpoint is damaged");
    const int64_t updates = int64_of(kOptimizerSteps);
    DPRUN_CHECK(updates == step - skipped, "the state's optimizer steps (", updates,
                ") do not fit its step ", step, " with ", skipped,
                " skipped: the checkpoint is damaged");
    if (run_.scaler) {
      const int64_t tracker = int64_of(kGrowthTracker);
      const int64_t interval = run_.scaler->options().growth_interval;
      DPRUN_CHECK(tracker >= 0 && tracker < interval, "the state's loss-scale growth tracker ",
                  tracker, " is outside [0, ", interval, "): the checkpoint is damaged");
    }
    return step;
  }

  // The optimizer's buffers, each checked against its parameter, under the optimizer's names.
  std::map<std::string, Tensor> buffers() const {
    const std::vector<std::string>& names = run_.parameter_names;
    const std::vector<Tensor>& parameters = run_.optimizer.parameters();
    std::map<std::string, Tensor> out;
    for (const auto& [name, tensor] : state_) {
      if (name == kOptimizerSteps || !starts_with(name, kOptimizerPrefix)) continue;
      const std::string rest = name.substr(sizeof kOptimizerPrefix - 1);
      const size_t dot = rest.find('.');
      const std::string parameter = dot == std::string::npos ? "" : rest.substr(dot + 1);
      const auto at = std::find(names.begin(), names.end(), parameter);
      DPRUN_CHECK(at != names.end(), "holds '", entry(name), "' for parameter '", parameter,
                  "', which this run does not train");
      const auto i = static_cast<size_t>(at - names.begin());
      const Tensor& p = parameters[i];
      DPRUN_CHECK(tensor.shape() == p.shape() && tensor.dtype() == p.dtype(), "its '", entry(name),
                  "' is ", type_text(tensor), " but parameter '", parameter, "' is ", type_text(p),
                  ": the checkpoint is damaged");
      out[rest.substr(0, dot + 1) + std::to_string(i)] = tensor;
    }
    for (const auto& own : run_.optimizer.state().buffers)
      DPRUN_CHECK(out.count(own.first), "has no '", entry(buffer_entry(own.first, names)),
                  "' for the optimizer: the checkpoint is damaged");
    return out;
  }

  const std::map<std::string, Tensor>& state_;
  uint64_t checksum_;
  const CheckpointedRun& run_;
};

}  // namespace

std::string checkpoint_path(const std::string& save_path) {
  const std::string suffix = ".onnx";
  std::string stem = save_path;
  if (stem.size() > suffix.size() &&
      stem.compare(stem.size() - suffix.size(), suffix.size(), suffix) == 0)
    stem.resize(stem.size() - suffix.size());
  return stem + ".ckpt.onnx";
}

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

void save_checkpoint(const std::string& path, const CheckpointedRun& run, int64_t step) {
  Graph graph = run.model.graph();
  for (auto& [name, tensor] : training_state(run, step)) {
    const std::string key = kStatePrefix + name;
    DPRUN_CHECK(!graph.initializers.count(key), path, ": the model has an initializer named '", key,
                "', which checkpoints keep for themselves");
    graph.initializers[key] = std::move(tensor);
  }
  std::map<std::string, Tensor> params;
  const auto names = run.model.parameter_names();
  for (size_t i = 0; i < names.size(); ++i) params[names[i]] = run.model.parameters()[i];
  std::map<std::string, Tensor> written = graph.initializers;  // as the file will hold them
  for (const auto& [name, value] : params) written[name] = value;
  graph.initializers[kCheckpointChecksum] =
      int64_scalar(static_cast<int64_t>(checkpoint_checksum(written)));
  save_graph(graph, params, path);
}

Checkpoint read_checkpoint(const std::string& path) {
  Checkpoint c{.graph = load_graph(path)};  // its errors name the file
  c.checksum = checkpoint_checksum(c.graph->initializers);
  const std::string prefix = kStatePrefix;
  for (auto it = c.graph->initializers.begin(); it != c.graph->initializers.end();) {
    if (it->first.rfind(prefix, 0) == 0) {
      c.state[it->first.substr(prefix.size())] = it->second;
      it = c.graph->initializers.erase(it);
    } else {
      ++it;
    }
  }
  if (!c.state.count(kStep))
    fail(path,
         ": is not a checkpoint (it holds no training state): --resume continues from the "
         "OUT.ckpt.onnx that --checkpoint-every writes beside --save OUT.onnx");
  return c;
}

int64_t restore_training_state(const Checkpoint& checkpoint, const std::string& path,
                               const CheckpointedRun& run) {
  try {
    return StateReader(checkpoint, run).restore();
  } catch (const Error& e) {
    fail(path, ": ", e.what());
  }
}

void remove_stale_temporaries(const std::string& path) {
  namespace fs = std::filesystem;
  const fs::path target(path);
  // Built by appends: GCC 12 reports a false -Wrestrict for "." + name + ".".
  std::string prefix(1, '.');
  prefix.append(target.filename().string()).append(".");
  const fs::path folder = target.parent_path().empty() ? fs::path(".") : target.parent_path();
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(folder, ec)) {
    const std::string name = entry.path().filename().string();
    // mkstemp's six characters after the prefix, and nothing else.
    if (name.size() == prefix.size() + 6 && starts_with(name, prefix) && entry.is_regular_file(ec))
      fs::remove(entry.path(), ec);
  }
}

}  // namespace dprun::cli
