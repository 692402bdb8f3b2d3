#pragma once
// The names of a checkpoint's state (engine/training/checkpoint_state.h), shared by its writer
// and its reader. Each is an initializer "dprun.state.<name>" of the checkpoint's graph.
#include <string>
#include <vector>

#include "engine/error.h"
#include "engine/training/checkpoint_checksum.h"

namespace dprun::checkpoint_keys {

inline constexpr char kStatePrefix[] = "dprun.state.";
inline constexpr char kStep[] = "step";
inline constexpr char kOptimizerSteps[] = "optimizer.steps";
inline constexpr char kOptimizerPrefix[] = "optimizer.";
inline constexpr char kLossScale[] = "loss_scale";
inline constexpr char kGrowthTracker[] = "loss_scale.growth_tracker";
inline constexpr char kSkippedSteps[] = "loss_scale.skipped_steps";
inline constexpr char kSeed[] = "seed";
inline constexpr char kSettingPrefix[] = "run.";
// The checksum's entry, under kStatePrefix.
inline const std::string kChecksum =
    std::string(kCheckpointChecksum).substr(sizeof kStatePrefix - 1);

inline bool starts_with(const std::string& text, const std::string& prefix) {
  return text.rfind(prefix, 0) == 0;
}

/// "optimizer.<kind>.<index>" of Optimizer::State as the checkpoint names it, by parameter:
/// "optimizer.<kind>.<parameter name>". Throws Error for an index past `names`.
inline std::string buffer_entry(const std::string& buffer, const std::vector<std::string>& names) {
  const size_t dot = buffer.rfind('.');
  const size_t i = std::stoul(buffer.substr(dot + 1));
  DPRUN_CHECK(i < names.size(), "checkpoint: optimizer buffer '", buffer, "' of ", names.size(),
              " parameters");
  return kOptimizerPrefix + buffer.substr(0, dot + 1) + names[i];
}

}  // namespace dprun::checkpoint_keys
