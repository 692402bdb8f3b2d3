#include "engine/plan_graphs.h"

#include <algorithm>
#include <cstdlib>
#include <initializer_list>
#include <string_view>

#include "engine/backend.h"
#include "engine/env_flag.h"
#include "engine/stream_capture.h"
#include "engine/stream_order.h"
#include "engine/wait_on_unwind.h"

namespace dprun {

namespace {

// Keys kept per model: each graph holds its pool's memory, and a key seen once holds nothing.
constexpr size_t kMaxKeys = 16;

bool has_op(const Plan& plan, std::initializer_list<std::string_view> op_types) {
  return std::any_of(plan.graph().nodes.begin(), plan.graph().nodes.end(), [&](const Node& n) {
    return std::find(op_types.begin(), op_types.end(), n.op_type) != op_types.end();
  });
}

// The debug switch that leaves the feeds out of the static inputs before a replay, to show that
// the copy is needed (a replay then computes on the previous run's inputs). Never set it in
// production.
bool inputs_copy_dropped() {
  const char* value = std::getenv("DPRUN_CUDA_GRAPHS_DROP");
  return value != nullptr && std::string_view(value) == "inputs";
}

// Copies of `tensors` made on the run's stream (new memory of the run's, not the graph's).
std::vector<Tensor> copies_of(const std::vector<Tensor>& tensors) {
  std::vector<Tensor> out;
  for (const Tensor& t : tensors) out.push_back(t.clone());
  return out;
}

void add_pointers(std::vector<const Tensor*>& list, const std::vector<Tensor>& tensors) {
  for (const Tensor& t : tensors) list.push_back(&t);
}

}  // namespace

// The execution context of a captured or replayed run: the caller's, or one made for the run
// and waited for when the run fails (as execute_plan does).
class GraphRunContext {
 public:
  GraphRunContext(Device device, const RunOptions& options) : options_(options) {
    // A replay reads what its capture queued, whatever the parameters' version then: the
    // kernels keep nothing derived from the parameters between these runs (KernelContext's
    // version 0), so constant casts and packed weights are made inside the graph.
    options_.parameters_version = 0;
    if (options.context == nullptr) {
      own_ = backend_for(device).create_execution_context(device, {.threads = options.threads});
      wait_if_failed_.emplace(*own_);
      options_.context = own_.get();
    }
  }
  ExecutionContext& execution() const { return *options_.context; }
  /// The caller's options, with the context set and no parameters' version.
  const RunOptions& options() const { return options_; }

 private:
  std::unique_ptr<ExecutionContext> own_;
  std::optional<WaitOnUnwind> wait_if_failed_;
  RunOptions options_;
};

struct PlanGraphs::Entry {
  std::mutex busy;  // held by the run using the static buffers
  int sightings = 0;
  bool fell_back = false;
  std::vector<Tensor> static_inputs;
  std::vector<Tensor> static_outputs;
  std::unique_ptr<CapturedGraph> graph;  // last: destroyed before the buffers it wrote

  /// Replays the graph on the context's stream; the simulated devices rerun the plan.
  void replay(const Plan& plan, const std::vector<Tensor>& parameters,
              const GraphRunContext& context) {
    graph->replay([&] {
      run_plan_steps(plan, context.execution(), parameters, static_inputs, context.options());
    });
  }
};

bool PlanGraphs::enabled_for(Device device) {
  return device.type != DeviceType::CPU && env_flag("DPRUN_CUDA_GRAPHS") &&
         stream_capture_for(device.type) != nullptr;
}

GraphStats PlanGraphs::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

std::string PlanGraphs::never_captured(const Plan& plan, const std::vector<Tensor>& feeds,
                                       const RunOptions& options) {
  if (!options.observers.empty()) return "observers see each node run";
  for (const Tensor& t : feeds)
    if (!t.defined() || t.dtype() == DType::String) return "a feed is missing or strings";
  std::lock_guard lock(mutex_);
  if (!combines_replicas_) combines_replicas_ = has_op(plan, {"AllReduceSum"});
  if (options.replica_group != nullptr && *combines_replicas_)
    return "its kernels meet the other replicas' on the host";
  return {};
}

std::shared_ptr<PlanGraphs::Entry> PlanGraphs::entry_for(Key key) {
  std::lock_guard lock(mutex_);
  if (auto it = entries_.find(key); it != entries_.end()) return it->second;
  if (entries_.size() >= kMaxKeys)
    std::erase_if(entries_,
                  [](const auto& e) { return !e.second->graph && e.second.use_count() == 1; });
  if (entries_.size() >= kMaxKeys) return nullptr;
  return entries_.emplace(std::move(key), std::make_shared<Entry>()).first->second;
}

void PlanGraphs::fell_back(Entry& entry, const std::string& why) {
  entry.fell_back = true;
  std::lock_guard lock(mutex_);
  ++stats_.fallbacks;
  stats_.last_fallback = why;
}

std::vector<Tensor> PlanGraphs::run(const Plan& plan, Device device,
                                    const std::vector<Tensor>& parameters,
                                    const std::vector<Tensor>& feeds, const RunOptions& options) {
  auto plain = [&] { return execute_plan(plan, device, parameters, feeds, {}, options); };
  if (feeds.size() != plan.feed_ids().size() || !never_captured(plan, feeds, options).empty())
    return plain();
  Key key{.device = device};
  for (const Tensor& t : feeds) key.feeds.emplace_back(t.dtype(), t.shape());
  for (const Tensor& p : parameters) key.parameters.push_back(p.defined() ? p.raw_data() : nullptr);
  bool unseeded_random = false;
  {
    std::lock_guard lock(mutex_);
    if (!draws_random_)
      draws_random_ = has_op(plan, {"RandomUniform", "RandomNormal", "RandomUniformLike",
                                    "RandomNormalLike", "Bernoulli", "Multinomial", "Dropout"});
    if (*draws_random_) {
      key.seed = options.random_seed;
      unseeded_random = !options.random_seed;
    }
  }
  std::shared_ptr<Entry> entry = entry_for(std::move(key));
  if (!entry) return plain();
  std::unique_lock busy(entry->busy, std::try_to_lock);
  if (!busy.owns_lock() || entry->fell_back) return plain();
  if (unseeded_random) {
    fell_back(*entry, "the plan draws random numbers without a seed: a replay would repeat them");
    return plain();
  }
  if (!entry->graph && ++entry->sightings < 2) return plain();  // the warm-up
  GraphRunContext context(device, options);
  RunOrder order(device);
  if (!order.active())  // a run inside a run on the device: the outer run's
    return execute_plan(plan, device, parameters, feeds, {}, context.options());
  return entry->graph ? replay(*entry, plan, parameters, feeds, context, order)
                      : capture(*entry, plan, parameters, feeds, context, order);
}

std::vector<Tensor> PlanGraphs::capture(Entry& entry, const Plan& plan,
                                        const std::vector<Tensor>& parameters,
                                        const std::vector<Tensor>& feeds,
                                        const GraphRunContext& context, RunOrder& order) {
  const Device device = context.execution().device();
  std::string failure;
  {
    std::vector<const Tensor*> given;
    add_pointers(given, parameters);
    add_pointers(given, feeds);
    order.begin(given);
    // The static inputs are made before the capture: the graph reads them, and they outlive it.
    std::vector<Tensor> inputs;
    for (const Tensor& feed : feeds) inputs.push_back(feed.to(device, /*copy=*/true));
    StreamCapture& capturer = *stream_capture_for(device.type);
    std::vector<Tensor> produced;
    std::unique_ptr<CapturedGraph> graph;
    try {
      capturer.begin(device);
      produced = run_plan_steps(plan, context.execution(), parameters, inputs, context.options());
      graph = capturer.end(device);
    } catch (const Error& e) {
      capturer.abort(device);
      failure = e.what();
    }
    if (graph) {
      entry.static_inputs = std::move(inputs);
      entry.static_outputs = std::move(produced);
      entry.graph = std::move(graph);
      // What a GPU's capture queued has not run: a replay computes the outputs. (Running it
      // again on the sim would apply in-place state updates twice.)
      if (!entry.graph->ran_at_capture()) entry.replay(plan, parameters, context);
      std::vector<Tensor> outputs = copies_of(entry.static_outputs);
      add_pointers(given, entry.static_inputs);
      add_pointers(given, entry.static_outputs);
      add_pointers(given, outputs);
      order.end(given);
      std::lock_guard lock(mutex_);
      ++stats_.captures;
      return outputs;
    }
  }
  fell_back(entry, failure);
  // The plain run goes on the same stream, after whatever the failed capture queued there.
  std::vector<Tensor> outputs =
      run_plan_steps(plan, context.execution(), parameters, feeds, context.options());
  std::vector<const Tensor*> given;
  add_pointers(given, parameters);
  add_pointers(given, feeds);
  add_pointers(given, outputs);
  order.end(given);
  return outputs;
}

std::vector<Tensor> PlanGraphs::replay(Entry& entry, const Plan& plan,
                                       const std::vector<Tensor>& parameters,
                                       const std::vector<Tensor>& feeds,
                                       const GraphRunContext& context, RunOrder& order) {
  // The previous replay, on whatever stream, used the static buffers: wait for their events.
  std::vector<const Tensor*> given;
  add_pointers(given, parameters);
  add_pointers(given, feeds);
  add_pointers(given, entry.static_inputs);
  add_pointers(given, entry.static_outputs);
  order.begin(given);
  if (!inputs_copy_dropped())
    for (size_t i = 0; i < feeds.size(); ++i) entry.static_inputs[i].copy_from(feeds[i]);
  try {
    entry.replay(plan, parameters, context);
  } catch (const Error& e) {
    // The simulated devices found that the run does not repeat its capture (its allocations
    // differ): a GPU's replay would compute on the wrong buffers. The key falls back for good.
    fell_back(entry, e.what());
    entry.graph.reset();
    std::vector<Tensor> outputs =
        run_plan_steps(plan, context.execution(), parameters, feeds, context.options());
    add_pointers(given, outputs);
    order.end(given);
    return outputs;
  }
  std::vector<Tensor> outputs = copies_of(entry.static_outputs);
  add_pointers(given, outputs);
  order.end(given);
  std::lock_guard lock(mutex_);
  ++stats_.replays;
  return outputs;
}

}  // namespace dprun
