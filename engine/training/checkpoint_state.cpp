#include "engine/training/checkpoint_state.h"

#include "engine/training/checkpoint_checksum.h"
#include "engine/training/checkpoint_keys.h"

namespace dprun {

namespace {

using namespace checkpoint_keys;

Tensor int64_scalar(int64_t v) {
  return Tensor::scalar<int64_t>(v);
}

Tensor text_tensor(const std::string& text) {
  return Tensor::from_vector<uint8_t>({static_cast<int64_t>(text.size())},
                                      std::vector<uint8_t>(text.begin(), text.end()));
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

}  // namespace

CheckpointContents checkpoint_contents(const CheckpointedRun& run, int64_t step) {
  CheckpointContents c{.graph = run.model.graph()};
  for (auto& [name, tensor] : training_state(run, step)) {
    const std::string key = kStatePrefix + name;
    DPRUN_CHECK(!c.graph.initializers.count(key), "the model has an initializer named '", key,
                "', which checkpoints keep for themselves");
    c.graph.initializers[key] = std::move(tensor);
  }
  const auto names = run.model.parameter_names();
  for (size_t i = 0; i < names.size(); ++i) c.parameters[names[i]] = run.model.parameters()[i];
  std::map<std::string, Tensor> written = c.graph.initializers;  // as the file will hold them
  for (const auto& [name, value] : c.parameters) written[name] = value;
  c.graph.initializers[kCheckpointChecksum] =
      int64_scalar(static_cast<int64_t>(checkpoint_checksum(written)));
  return c;
}

Checkpoint checkpoint_from_graph(std::shared_ptr<Graph> graph, const std::string& source) {
  Checkpoint c{.graph = std::move(graph)};
  c.checksum = checkpoint_checksum(c.graph->initializers);
  for (auto it = c.graph->initializers.begin(); it != c.graph->initializers.end();) {
    if (starts_with(it->first, kStatePrefix)) {
      c.state[it->first.substr(sizeof kStatePrefix - 1)] = it->second;
      it = c.graph->initializers.erase(it);
    } else {
      ++it;
    }
  }
  if (!c.state.count(kStep))
    fail(source,
         ": is not a checkpoint (it holds no training state): --resume continues from the "
         "OUT.ckpt.onnx that --checkpoint-every writes beside --save OUT.onnx");
  return c;
}

}  // namespace dprun
