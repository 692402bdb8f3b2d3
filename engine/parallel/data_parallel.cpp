#include "engine/parallel/data_parallel.h"

#include <algorithm>
#include <chrono>
#include <set>

#include "engine/backend.h"
#include "engine/parallel/comm.h"
#include "engine/parallel/device_timing.h"
#include "engine/parallel/gather.h"
#include "engine/parallel/replicate.h"
#include "engine/random_seed.h"
#include "engine/warning.h"

namespace dprun {

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

std::vector<DeviceCapacity> capacities(const std::vector<Device>& devices) {
  std::vector<DeviceCapacity> out;
  for (const Device& d : devices) {
    auto same_type = std::count_if(devices.begin(), devices.end(),
                                   [&](const Device& e) { return e.type == d.type; });
    DeviceProperties p = backend_for(d).properties(d, static_cast<int>(same_type));
    out.push_back({d, static_cast<double>(p.compute_units), static_cast<double>(p.total_memory)});
  }
  return out;
}

}  // namespace

std::optional<std::string> imbalance_warning(const std::vector<DeviceCapacity>& devices) {
  // PyTorch warns when a GPU has less than 75% of the memory or cores of the largest.
  auto check = [&](auto field, const char* what) -> std::optional<std::string> {
    double most = 0;
    for (const auto& d : devices) most = std::max(most, field(d));
    for (const auto& d : devices)
      if (most > 0 && field(d) < 0.75 * most)
        return "there is an imbalance between your devices: " + d.device.to_string() + " has " +
               std::to_string(static_cast<int64_t>(field(d))) + " " + what + " against " +
               std::to_string(static_cast<int64_t>(most)) +
               " on the largest; the slowest device will pace every step";
    return std::nullopt;
  };
  if (auto m = check([](const DeviceCapacity& d) { return d.compute_units; }, "compute units"))
    return m;
  return check([](const DeviceCapacity& d) { return d.memory_bytes; }, "bytes of memory");
}

DataParallel::DataParallel(std::shared_ptr<Model> module, DataParallelOptions options)
    : module_(std::move(module)), options_(std::move(options)) {
  DPRUN_CHECK(module_ != nullptr, "DataParallel: no model given");
  const auto& ids = options_.device_ids;
  std::set<Device> seen;
  for (const Device& d : ids) {
    DPRUN_CHECK(seen.insert(d).second, "DataParallel: device ", d.to_string(), " is listed twice");
    backend_for(d).check_device(d);
  }
  if (ids.empty()) return;
  for (const Tensor& p : module_->parameters())
    if (p.device() != ids[0])
      fail("module must have its parameters on device ", ids[0].to_string(),
           " (device_ids[0]) but found one of them on device: ", p.device().to_string());
  if (module_->device() != ids[0])
    fail("module must run on device ", ids[0].to_string(), " (device_ids[0]) but is placed on ",
         module_->device().to_string());
  if (options_.split_policy == SplitPolicy::Weighted && !options_.weights.empty())
    DPRUN_CHECK(options_.weights.size() == ids.size(), "DataParallel: ", options_.weights.size(),
                " weights for ", ids.size(), " devices");
  if (ids.size() > 1)
    if (auto message = imbalance_warning(capacities(ids))) warn(*message);
}

Device DataParallel::output_device() const {
  if (options_.output_device) return *options_.output_device;
  return options_.device_ids.empty() ? module_->device() : options_.device_ids[0];
}

DataParallelRun DataParallel::last_run() const {
  std::lock_guard lock(mutex_);
  return last_run_;
}

std::vector<std::shared_ptr<Model>> DataParallel::ensure_replicas(
    const std::vector<Device>& devices, DataParallelRun& run) {
  // Each replica remembers the parameter version it holds, so one that sat out a call (fewer
  // chunks than devices) is still refreshed before it next runs.
  uint64_t version = module_->parameters_version();
  if (replicas_.empty()) {
    replicas_ = replicate(*module_, options_.device_ids);
    replica_versions_.assign(replicas_.size(), version);
    run.replicated = replicas_.size() > 1;
  }
  std::vector<std::shared_ptr<Model>> used;
  std::vector<Model*> stale;
  for (const Device& d : devices) {
    size_t i = 0;
    while (i < options_.device_ids.size() && options_.device_ids[i] != d) ++i;
    DPRUN_CHECK(i < replicas_.size(), "no replica for device ", d.to_string());
    if (i > 0 && (!options_.cache_replicas || replica_versions_[i] != version)) {
      stale.push_back(replicas_[i].get());
      replica_versions_[i] = version;
      run.replicated = true;
    }
    used.push_back(replicas_[i]);
  }
  // The copies are split over the devices' workers, which are idle until the replicas run.
  if (!stale.empty()) refresh_replicas(*module_, stale, options_.device_ids);
  return used;
}

void DataParallel::check_split_dims_fit(const std::vector<InputSplit>& splits,
                                        const std::vector<std::string>& names,
                                        const ScatterResult& parts) const {
  // A dim the model declares with a fixed size takes chunks of exactly that size (a model
  // exported with a static batch, run on as many of those batches as there are devices). Say
  // so before the replicas each fail with a shape mismatch.
  auto types = module_->input_types();
  for (size_t i = 0; i < types.size(); ++i) {
    if (splits[i].broadcast || !types[i].shape || types[i].shape->empty()) continue;
    auto rank = static_cast<int64_t>(types[i].shape->size());
    int64_t d = splits[i].dim.value_or(options_.dim);
    if (d < 0) d += rank;
    if (d < 0 || d >= rank) continue;
    const Dim& dim = (*types[i].shape)[static_cast<size_t>(d)];
    if (!dim.is_known()) continue;
    std::string chunks;
    bool fit = true;
    for (const std::vector<Tensor>& chunk : parts.inputs) {
      const Tensor& t = chunk[i];
      const int64_t got = t.rank() > d ? t.dim(d) : -1;
      fit = fit && got == dim.value;
      chunks += (chunks.empty() ? "" : ", ") + std::to_string(got);
    }
    if (!fit)
      fail("input '", names[i], "' has the fixed size ", dim.value, " along dim ", d,
           ", but the split gives its devices ", chunks, ": give each device ", dim.value,
           " (a batch of ", dim.value * static_cast<int64_t>(parts.inputs.size()), " on ",
           parts.inputs.size(), " devices), broadcast it (--split ", names[i],
           "=none) or export the model with a symbolic dim there");
  }
}

std::vector<double> DataParallel::measure_weights(const std::vector<Tensor>& inputs) {
  // Time one even split per device; a device's weight is its measured rows per second.
  auto names = module_->input_names();
  std::vector<InputSplit> splits;
  for (const auto& name : names) {
    auto it = options_.input_splits.find(name);
    splits.push_back(it == options_.input_splits.end() ? InputSplit{} : it->second);
  }
  ScatterResult parts =
      scatter(inputs, options_.device_ids,
              {.dim = options_.dim, .policy = SplitPolicy::Even, .splits = splits, .names = names});
  if (parts.devices.size() != options_.device_ids.size())
    return std::vector<double>(options_.device_ids.size(), 1.0);
  DataParallelRun ignored;
  std::vector<std::shared_ptr<Model>> used = ensure_replicas(parts.devices, ignored);
  ParallelApplyOptions apply;
  apply.threads = options_.threads;
  apply.device_count = static_cast<int>(options_.device_ids.size());
  std::vector<ReplicaTiming> timings;
  for (int round = 0; round < 2; ++round)
    parallel_apply_timing_devices(used, parts.inputs, apply, timings);  // warm, then time
  std::vector<double> weights;
  for (size_t i = 0; i < timings.size(); ++i)
    weights.push_back(static_cast<double>(std::max<int64_t>(parts.rows[i], 1)) /
                      std::max(timings[i].busy_seconds, 1e-9));
  return weights;
}

std::vector<Tensor> DataParallel::forward(const std::vector<Tensor>& inputs) {
  // Everything runs on the calling thread, which also runs device_ids[0]'s replica
  // (run_on_workers): only the other devices' replicas are handed off.
  std::lock_guard lock(mutex_);
  DataParallelRun run;
  std::vector<std::vector<Tensor>> outputs = run_replicas(inputs, run);
  if (options_.device_ids.size() <= 1) {  // no devices or one: nothing to gather
    last_run_ = run;
    return std::move(outputs[0]);
  }
  auto start = std::chrono::steady_clock::now();
  std::vector<Tensor> result = gather_or_sum(outputs);
  run.gather_seconds = seconds_since(start);
  last_run_ = run;
  return result;
}

std::vector<std::vector<Tensor>> DataParallel::forward_per_replica(
    const std::vector<Tensor>& inputs) {
  std::lock_guard lock(mutex_);
  DataParallelRun run;
  std::vector<std::vector<Tensor>> outputs = run_replicas(inputs, run);
  last_run_ = run;
  return outputs;
}

std::vector<std::shared_ptr<Model>> DataParallel::replicas() const {
  std::lock_guard lock(mutex_);
  return replicas_;
}

void DataParallel::mark_replicas_current() {
  std::lock_guard lock(mutex_);
  replica_versions_.assign(replicas_.size(), module_->parameters_version());
}

std::vector<std::vector<Tensor>> DataParallel::run_replicas(const std::vector<Tensor>& inputs,
                                                            DataParallelRun& run) {
  const auto& ids = options_.device_ids;
  if (ids.empty()) {  // no devices: the base model runs as it is
    RunOptions direct;
    direct.threads = options_.threads;
    direct.observers = options_.observers;
    if (random_seed_) direct.random_seed = derive_seed(*random_seed_, 0);
    auto outputs = module_->run(inputs, direct);
    run.devices_used = {module_->device()};
    return {outputs};
  }
  auto names = module_->input_names();
  std::vector<InputSplit> splits;
  for (const auto& name : names) {
    auto it = options_.input_splits.find(name);
    splits.push_back(it == options_.input_splits.end() ? InputSplit{} : it->second);
  }
  for (const auto& [name, rule] : options_.input_splits)
    DPRUN_CHECK(std::find(names.begin(), names.end(), name) != names.end(), "split rule for '",
                name, "', which is not an input of the model");
  auto outputs_named = module_->output_names();
  for (const auto& name : options_.summed_outputs)
    DPRUN_CHECK(std::find(outputs_named.begin(), outputs_named.end(), name) != outputs_named.end(),
                "summed output '", name, "' is not an output of the model");
  DPRUN_CHECK(inputs.size() == names.size(), "the model takes ", names.size(), " inputs but ",
              inputs.size(), " were given");

  if (ids.size() == 1) {  // one device: no replication, no scatter, no gather
    ParallelApplyOptions apply;
    apply.threads = options_.threads;
    apply.device_count = 1;
    apply.observers = options_.observers;
    apply.random_seed = random_seed_;
    auto outputs = parallel_apply({module_}, {inputs}, apply, &run.timings);
    run.devices_used = ids;
    int64_t rows = 0;
    for (size_t i = 0; i < inputs.size(); ++i)
      if (!splits[i].broadcast && inputs[i].rank() > 0) {
        int64_t d = splits[i].dim.value_or(options_.dim);
        rows = inputs[i].dim(d);
        break;
      }
    run.chunk_rows = {rows};
    return outputs;
  }

  std::vector<double> weights = options_.weights;
  if (options_.split_policy == SplitPolicy::Weighted && weights.empty()) {
    weights = measure_weights(inputs);
    options_.weights = weights;
  }
  auto start = std::chrono::steady_clock::now();
  ScatterResult parts = scatter(inputs, ids,
                                {.dim = options_.dim,
                                 .policy = options_.split_policy,
                                 .weights = weights,
                                 .splits = splits,
                                 .names = names});
  run.scatter_seconds = seconds_since(start);
  if (parts.devices.size() > 1) check_split_dims_fit(splits, names, parts);

  start = std::chrono::steady_clock::now();
  std::vector<std::shared_ptr<Model>> used = ensure_replicas(parts.devices, run);
  run.replicate_seconds = seconds_since(start);

  ParallelApplyOptions apply;
  apply.threads = options_.threads;
  apply.device_count = static_cast<int>(ids.size());
  apply.observers = options_.observers;
  apply.random_seed = random_seed_;
  start = std::chrono::steady_clock::now();
  auto outputs = parallel_apply(used, parts.inputs, apply, &run.timings);
  run.apply_seconds = seconds_since(start);
  run.devices_used = parts.devices;
  run.chunk_rows = parts.rows;
  return outputs;
}

std::vector<Tensor> DataParallel::gather_or_sum(
    const std::vector<std::vector<Tensor>>& outputs) const {
  auto names = module_->output_names();
  std::vector<bool> summed(names.size());
  for (size_t o = 0; o < names.size(); ++o) summed[o] = options_.summed_outputs.count(names[o]);
  if (std::none_of(summed.begin(), summed.end(), [](bool s) { return s; }))
    return gather(outputs, output_device(), options_.dim);
  // Concatenate the others together, then put the sums in their places.
  std::vector<std::vector<Tensor>> concatenated(outputs.size());
  for (size_t r = 0; r < outputs.size(); ++r)
    for (size_t o = 0; o < names.size(); ++o)
      if (!summed[o]) concatenated[r].push_back(outputs[r][o]);
  std::vector<Tensor> gathered = concatenated[0].empty()
                                     ? std::vector<Tensor>{}
                                     : gather(concatenated, output_device(), options_.dim);
  // All sums at once: on CPU devices split over their workers (idle now that the replicas are
  // done), on GPUs one NCCL reduce onto the output device (comm.h routes by device).
  std::vector<std::vector<Tensor>> to_sum(outputs.size());
  for (size_t r = 0; r < outputs.size(); ++r)
    for (size_t o = 0; o < names.size(); ++o)
      if (summed[o]) to_sum[r].push_back(outputs[r][o]);
  std::vector<Tensor> sums = reduce_add_coalesced(to_sum, output_device(), options_.device_ids);
  std::vector<Tensor> result;
  size_t next = 0, next_sum = 0;
  for (size_t o = 0; o < names.size(); ++o)
    result.push_back(summed[o] ? sums[next_sum++] : gathered[next++]);
  return result;
}

std::vector<Tensor> data_parallel(const Model& module, const std::vector<Tensor>& inputs,
                                  const std::vector<Device>& device_ids,
                                  std::optional<Device> output_device, int64_t dim) {
  if (device_ids.empty()) return module.run(inputs);
  Device out = output_device.value_or(device_ids[0]);
  if (device_ids.size() == 1) {
    auto outputs = module.run(inputs);
    for (Tensor& t : outputs) t = t.to(out);
    return outputs;
  }
  auto names = module.input_names();
  ScatterResult parts = scatter(inputs, device_ids, {.dim = dim, .names = names});
  auto replicas = replicate(
      module, std::vector<Device>(device_ids.begin(),
                                  device_ids.begin() + static_cast<long>(parts.devices.size())));
  ParallelApplyOptions apply;
  apply.device_count = static_cast<int>(device_ids.size());
  return gather(parallel_apply(replicas, parts.inputs, apply), out, dim);
}

}  // namespace dprun
