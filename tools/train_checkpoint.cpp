#include "tools/train_checkpoint.h"

#include "engine/parallel/distributed.h"
#include "loader/onnx_loader.h"

namespace dprun::cli {

namespace {

constexpr char kStatePrefix[] = "dprun.state.";
constexpr char kStep[] = "step";
constexpr char kOptimizerSteps[] = "optimizer.steps";
constexpr char kOptimizerPrefix[] = "optimizer.";
constexpr char kLossScale[] = "loss_scale";
constexpr char kGrowthTracker[] = "loss_scale.growth_tracker";
constexpr char kSkippedSteps[] = "loss_scale.skipped_steps";
constexpr char kChecksum[] = "model.checksum";
constexpr char kSeed[] = "seed";

Tensor int64_scalar(int64_t v) {
  return Tensor::scalar<int64_t>(v);
}

std::map<std::string, Tensor> training_state(const Model& model, const Optimizer& optimizer,
                                             const GradScaler* scaler, int64_t step,
                                             uint64_t seed) {
  std::map<std::string, Tensor> state;
  state[kStep] = int64_scalar(step);
  state[kSeed] = int64_scalar(static_cast<int64_t>(seed));
  state[kChecksum] = int64_scalar(static_cast<int64_t>(checksum_parameters(model)));
  const Optimizer::State o = optimizer.state();
  state[kOptimizerSteps] = int64_scalar(o.steps);
  for (const auto& [name, buffer] : o.buffers)
    state[kOptimizerPrefix + name] = buffer.to(Device::cpu());
  if (scaler) {
    state[kLossScale] = Tensor::scalar<float>(scaler->scale());
    state[kGrowthTracker] = int64_scalar(scaler->growth_tracker());
    state[kSkippedSteps] = int64_scalar(scaler->skipped_steps());
  }
  return state;
}

}  // namespace

std::string checkpoint_path(const std::string& save_path) {
  const std::string suffix = ".onnx";
  std::string stem = save_path;
  if (stem.size() > suffix.size() &&
      stem.compare(stem.size() - suffix.size(), suffix.size(), suffix) == 0)
    stem.resize(stem.size() - suffix.size());
  return stem + ".ckpt.onnx";
}

void save_checkpoint(const std::string& path, const Model& model, const Optimizer& optimizer,
                     const GradScaler* scaler, int64_t step, uint64_t seed) {
  Graph graph = model.graph();
  for (auto& [name, tensor] : training_state(model, optimizer, scaler, step, seed)) {
    const std::string key = kStatePrefix + name;
    DPRUN_CHECK(!graph.initializers.count(key), path, ": the model has an initializer named '", key,
                "', which checkpoints keep for themselves");
    graph.initializers[key] = std::move(tensor);
  }
  std::map<std::string, Tensor> params;
  const auto names = model.parameter_names();
  for (size_t i = 0; i < names.size(); ++i) params[names[i]] = model.parameters()[i];
  save_graph(graph, params, path);
}

Checkpoint read_checkpoint(const std::string& path) {
  Checkpoint c{.graph = load_graph(path)};  // its errors name the file
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
                               const Model& model, Optimizer& optimizer, GradScaler* scaler,
                               uint64_t seed) {
  const auto& state = checkpoint.state;
  try {
    auto int64_of = [&](const char* name) {
      auto it = state.find(name);
      DPRUN_CHECK(
          it != state.end() && it->second.dtype() == DType::Int64 && it->second.numel() == 1,
          "has no int64 '", kStatePrefix, name, "': not a dprun checkpoint");
      return it->second.data<int64_t>()[0];
    };
    const int64_t step = int64_of(kStep);
    DPRUN_CHECK(step >= 0, "the state's step is ", step, ": the checkpoint is damaged");
    const auto saved_seed = static_cast<uint64_t>(int64_of(kSeed));
    DPRUN_CHECK(saved_seed == seed, "was trained with --seed ", saved_seed,
                ": resume with the same --seed (it orders the data and draws the Dropout masks)");
    DPRUN_CHECK(int64_of(kChecksum) == static_cast<int64_t>(checksum_parameters(model)),
                "its parameters do not match its state's checksum: the checkpoint is damaged");
    Optimizer::State o{.steps = int64_of(kOptimizerSteps)};
    const std::string prefix = kOptimizerPrefix;
    for (const auto& [name, tensor] : state)
      if (name != kOptimizerSteps && name.rfind(prefix, 0) == 0)
        o.buffers[name.substr(prefix.size())] = tensor;
    optimizer.load_state(o);
    const bool scaled = state.count(kLossScale) > 0;
    DPRUN_CHECK(scaled == (scaler != nullptr),
                scaled ? "is of float16 training, with a loss scale; train with --precision "
                         "float16 to resume it"
                       : "has no loss scale: it is not of float16 training");
    if (scaler)
      scaler->restore(state.at(kLossScale).data<float>()[0], int64_of(kGrowthTracker),
                      int64_of(kSkippedSteps));
    return step;
  } catch (const Error& e) {
    fail(path, ": ", e.what());
  }
}

}  // namespace dprun::cli
