#include "engine/training/checkpoint_state.h"

#include <algorithm>

#include "engine/training/checkpoint_keys.h"

namespace dprun {

namespace {

using namespace checkpoint_keys;

// "float32[5, 12]": a tensor's type without its device.
std::string type_text(const Tensor& t) {
  return std::string(dtype_name(t.dtype())) + shape_to_string(t.shape());
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

int64_t restore_training_state(const Checkpoint& checkpoint, const std::string& source,
                               const CheckpointedRun& run) {
  try {
    return StateReader(checkpoint, run).restore();
  } catch (const Error& e) {
    fail(source, ": ", e.what());
  }
}

}  // namespace dprun
