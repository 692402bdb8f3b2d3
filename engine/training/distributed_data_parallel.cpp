#include "engine/training/distributed_data_parallel.h"

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstring>
#include <iomanip>
#include <sstream>

#include "engine/distributed/rank_failure.h"

namespace dprun {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// What each rank tells the others at the end of a step.
struct StepStatus {
  uint8_t failed = 0;
  double loss = 0;  // this rank's weighted loss, in the loss's dtype converted to double
  double compute_seconds = 0;
  int64_t rows = 0;
};

std::string hex(uint64_t v) {
  std::ostringstream out;
  out << "0x" << std::hex << std::setw(16) << std::setfill('0') << v;
  return out.str();
}

// Copies rank 0's `tensors` into every rank's, together: where they are, when that is host
// memory or the group's device (NCCL's GPU); otherwise through host copies (a GPU's parameters
// each way, once at the start and for in-place state once per step, over an MPI group).
void broadcast_from_rank0(ProcessGroup& group, const std::vector<Tensor>& tensors) {
  std::vector<Tensor> sent, staged;  // staged[k]: the host copy of sent[k] where one is needed
  for (const Tensor& t : tensors) {
    if (t.dtype() == DType::String) continue;
    const bool in_place = t.device().type == DeviceType::CPU || t.device() == group.reduce_device();
    sent.push_back(in_place ? t : t.to(Device::cpu()));
    staged.push_back(in_place ? Tensor() : t);
  }
  group.broadcast_coalesced(sent, 0);
  for (size_t k = 0; k < sent.size(); ++k)
    if (staged[k].defined()) staged[k].copy_from(sent[k]);  // shares the parameter's storage
}

// FNV-1a over the parts of a graph, each length-prefixed so that no two graphs run together.
class GraphHash {
 public:
  uint64_t value() const { return h_; }

  void word(uint64_t w) {
    for (int i = 0; i < 8; ++i) byte(static_cast<uint8_t>(w >> (8 * i)));
  }
  void text(const std::string& s) {
    word(s.size());
    for (char c : s) byte(static_cast<uint8_t>(c));
  }
  void tensor(const Tensor& t) {
    word(static_cast<uint64_t>(t.dtype()));
    word(t.shape().size());
    for (int64_t d : t.shape()) word(static_cast<uint64_t>(d));
    if (t.dtype() != DType::String) word(checksum_tensors({t}));  // strings: their shape only
  }
  void attribute(const Attribute& a) {
    word(static_cast<uint64_t>(a.kind));
    using Kind = Attribute::Kind;
    switch (a.kind) {
      case Kind::Float:
        return word(std::bit_cast<uint32_t>(a.f));
      case Kind::Int:
        return word(static_cast<uint64_t>(a.i));
      case Kind::String:
        return text(a.s);
      case Kind::Tensor:
        return tensor(a.t);
      case Kind::Graph:
        return graph(*a.g);
      case Kind::Floats:
        word(a.floats.size());
        for (float f : a.floats) word(std::bit_cast<uint32_t>(f));
        return;
      case Kind::Ints:
        word(a.ints.size());
        for (int64_t i : a.ints) word(static_cast<uint64_t>(i));
        return;
      case Kind::Strings:
        word(a.strings.size());
        for (const auto& s : a.strings) text(s);
        return;
      case Kind::Tensors:
        word(a.tensors.size());
        for (const auto& t : a.tensors) tensor(t);
        return;
      case Kind::Graphs:
        word(a.graphs.size());
        for (const auto& g : a.graphs) graph(*g);
        return;
    }
  }
  void names(const std::vector<std::string>& list) {
    word(list.size());
    for (const auto& s : list) text(s);
  }
  void graph(const Graph& g) {
    word(g.nodes.size());
    for (const Node& n : g.nodes) {
      text(n.op_type);
      text(n.domain);
      text(n.name);
      names(n.inputs);
      names(n.outputs);
      word(n.attributes.size());
      for (const auto& [key, a] : n.attributes) {
        text(key);
        attribute(a);
      }
    }
    word(g.inputs.size());
    for (const ValueInfo& v : g.inputs) text(v.name);
    word(g.outputs.size());
    for (const ValueInfo& v : g.outputs) text(v.name);
    for (const auto& [domain, version] : g.opset_imports) {
      text(domain);
      word(static_cast<uint64_t>(version));
    }
    for (const auto& [value, state] : g.state_updates) {
      text(value);
      text(state);
    }
  }

 private:
  void byte(uint8_t b) {
    h_ ^= b;
    h_ *= 1099511628211ull;
  }
  uint64_t h_ = 1469598103934665603ull;
};

}  // namespace

std::vector<RankFact> model_facts(const Model& model) {
  const std::string topic = "the model";
  std::vector<RankFact> facts =
      tensor_facts(topic, "parameter", model.parameter_names(), model.parameters());
  const Graph& graph = model.graph();
  for (size_t n = 0; n < graph.nodes.size(); ++n)
    facts.push_back({topic, detail::concat("the graph's node ", n + 1),
                     graph.nodes[n].op_type + " '" + graph.nodes[n].name + "'"});
  GraphHash hash;
  hash.graph(graph);
  facts.push_back({topic, "the graph's digest", hex(hash.value())});
  return facts;
}

std::vector<int64_t> shard_positions(int64_t batch_rows, int rank, int world_size) {
  DPRUN_CHECK(world_size >= 1 && rank >= 0 && rank < world_size, "shard_positions: rank ", rank,
              " is not a rank of a group of ", world_size);
  DPRUN_CHECK(batch_rows >= 0, "shard_positions: a batch of ", batch_rows, " rows");
  std::vector<int64_t> positions;
  for (int64_t p = rank; p < batch_rows; p += world_size) positions.push_back(p);
  return positions;
}

uint64_t checksum_parameters(const Model& model) {
  std::vector<Tensor> values;
  for (const Tensor& p : model.parameters())
    if (p.dtype() != DType::String) values.push_back(p);
  return checksum_tensors(values);
}

uint64_t checksum_tensors(const std::vector<Tensor>& tensors) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&h](uint64_t w) {
    h ^= w;
    h *= 1099511628211ull;
  };
  for (const Tensor& tensor : tensors) {
    const Tensor t = tensor.device().type == DeviceType::CPU ? tensor : tensor.to(Device::cpu());
    mix(t.nbytes());
    const auto* bytes = static_cast<const uint8_t*>(t.raw_data());
    size_t n = t.nbytes(), i = 0;
    for (; i + 8 <= n; i += 8) {
      uint64_t w;
      std::memcpy(&w, bytes + i, 8);
      mix(w);
    }
    for (; i < n; ++i) mix(bytes[i]);
  }
  return h;
}

DistributedDataParallel::DistributedDataParallel(std::shared_ptr<Model> model,
                                                 TrainerOptions options,
                                                 std::shared_ptr<ProcessGroup> group,
                                                 DistributedOptions distributed)
    : model_(std::move(model)), group_(std::move(group)), options_(distributed) {
  DPRUN_CHECK(model_ != nullptr, "DistributedDataParallel: no model given");
  DPRUN_CHECK(group_ != nullptr, "DistributedDataParallel: no process group given");
  overlap_ = options.parallel.device_ids.size() <= 1;
  if (overlap_) {
    NodeObserver observer;
    observer.after = [this](const Node& node, Device, std::span<const Tensor> outputs) {
      on_node_done(node, outputs);
    };
    options.parallel.observers.push_back(std::move(observer));
  }
  trainer_ = std::make_unique<Trainer>(model_, std::move(options));

  // A gradient is final as soon as the value it copies is computed: the training graph names
  // its gradient outputs with Identity nodes at the very end, so follow those back to the node
  // that computes the value. Buckets follow the order of those nodes.
  const TrainingGraph& training = trainer_->training_graph();
  const auto& nodes = training.graph->nodes;
  std::unordered_map<std::string, size_t> producer;  // value -> index of its node
  for (size_t n = 0; n < nodes.size(); ++n)
    for (const auto& out : nodes[n].outputs) producer[out] = n;
  std::vector<GradientLayout> layouts;
  std::vector<size_t> position;
  for (size_t i = 0; i < training.parameters.size(); ++i) {
    Tensor p = model_->parameter(training.parameters[i]);
    layouts.push_back({p.shape(), p.dtype()});
    std::string value = gradient_output_name(training.parameters[i]);
    auto it = producer.find(value);
    while (it != producer.end() && nodes[it->second].op_type == "Identity" &&
           !nodes[it->second].inputs.empty() && !nodes[it->second].inputs[0].empty()) {
      value = nodes[it->second].inputs[0];
      it = producer.find(value);
    }
    gradient_sources_[value].push_back(i);
    position.push_back(it == producer.end() ? 0 : it->second + 1);
  }
  std::vector<size_t> order(layouts.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return position[a] < position[b]; });
  reducer_ = std::make_unique<Reducer>(
      group_, std::move(layouts), order,
      ReducerOptions{.bucket_bytes = options_.bucket_bytes,
                     .order = options_.deterministic ? ReduceOrder::RankOrder : ReduceOrder::Any,
                     .wire_dtype = options_.gradient_compression});
  for (const auto& [value, param] : training.graph->state_updates) buffers_.push_back(param);
  std::sort(buffers_.begin(), buffers_.end());
  buffers_.erase(std::unique(buffers_.begin(), buffers_.end()), buffers_.end());

  auto ranks = static_cast<size_t>(group_->size());
  stats_.rows.assign(ranks, 0);
  stats_.compute_seconds.assign(ranks, 0);
  stats_.buckets = reducer_->bucket_count();
}

void DistributedDataParallel::broadcast_parameters() {
  broadcast_from_rank0(*group_, model_->parameters());
  model_->mark_parameters_changed();
  broadcast_done_ = true;
}

void DistributedDataParallel::on_node_done(const Node& node, std::span<const Tensor> outputs) {
  if (!collecting_) return;
  for (size_t o = 0; o < node.outputs.size() && o < outputs.size(); ++o) {
    auto it = gradient_sources_.find(node.outputs[o]);
    if (it == gradient_sources_.end() || !outputs[o].defined()) continue;
    for (size_t i : it->second) reducer_->mark_ready(i, outputs[o]);
  }
  reducer_->progress();
}

std::optional<int64_t> DistributedDataParallel::count_targets(const std::vector<Tensor>& targets) {
  if (!trainer_->training_graph().ignored_target) return std::nullopt;
  group_->set_stage(detail::concat("of step ", stats_.steps + 1));
  int64_t mine = 0;
  for (const Tensor& t : targets) {
    try {
      mine += trainer_->counted_targets(t).value_or(0);
    } catch (...) {
      // Every rank must reach the exchange: a target that cannot be read fails its forward pass.
    }
  }
  int64_t total = 0;
  for (int64_t c : all_gather_values(*group_, mine)) total += c;  // the same on every rank
  return total;
}

double DistributedDataParallel::shard_weight(const Tensor& target, int64_t rows,
                                             int64_t global_rows,
                                             std::optional<int64_t> global_counted) const {
  // Rows weigh a shard of many ignored targets as much as one of none: with a loss averaged
  // over the counted targets, the shard weighs its share of them (a step that counts none has
  // the loss 0 and no gradient, as in one process). With no target ignored both are the same
  // double: rows * k / (global_rows * k) rounds as rows / global_rows.
  std::optional<int64_t> mine;
  if (global_counted) {
    try {
      mine = trainer_->counted_targets(target);
    } catch (...) {
      mine = 0;  // the forward pass reports the target
    }
  }
  if (!mine) return static_cast<double>(rows) / static_cast<double>(global_rows);
  return *global_counted == 0 ? 0.0
                              : static_cast<double>(*mine) / static_cast<double>(*global_counted);
}

double DistributedDataParallel::accumulate_locally(const std::vector<Tensor>& inputs,
                                                   const Tensor& target, int64_t rows,
                                                   double weight) {
  if (rows == 0 || unsynced_.error) return 0;
  auto compute_start = Clock::now();
  double loss = 0;
  try {
    loss = trainer_->forward_backward(inputs, target, weight, unsynced_.batches > 0);
    ++unsynced_.batches;
    unsynced_.rows += rows;
    unsynced_.loss += loss;
  } catch (...) {
    // Kept for the syncing call, which every rank makes: it reports the failure to all.
    unsynced_.error = std::make_exception_ptr(Error(
        detail::concat("step ", stats_.steps + 1, ": ", error_message(std::current_exception()))));
  }
  unsynced_.compute_seconds += seconds_since(compute_start);
  return loss;
}

double DistributedDataParallel::forward_backward(const std::vector<Tensor>& inputs,
                                                 const Tensor& target, int64_t rows,
                                                 int64_t global_rows, bool sync,
                                                 std::optional<int64_t> global_counted) {
  DPRUN_CHECK(global_rows > 0 && rows >= 0 && rows <= global_rows,
              "DistributedDataParallel: a shard of ", rows, " rows of a global batch of ",
              global_rows);
  // A collective that times out names the step it belongs to.
  group_->set_stage(detail::concat("of step ", stats_.steps + 1));
  if (!broadcast_done_) broadcast_parameters();
  auto start = Clock::now();
  if (options_.broadcast_buffers && !buffers_.empty()) broadcast_buffers();
  // A whole step in one call: its counted targets are this batch's, over the ranks.
  if (!global_counted && sync && !unsynced_.pending) global_counted = count_targets({target});
  const double weight = shard_weight(target, rows, global_rows, global_counted);
  if (!sync) {
    unsynced_.pending = true;
    return accumulate_locally(inputs, target, rows, weight);
  }

  reducer_->begin_step();
  auto compute_start = Clock::now();
  std::exception_ptr error = unsynced_.error;
  const bool accumulated = unsynced_.batches > 0;
  double loss = 0;
  if (rows > 0 && !error) {
    // The backward pass's outputs are the buckets' values only when nothing was accumulated.
    collecting_ = overlap_ && !accumulated;
    try {
      loss = trainer_->forward_backward(inputs, target, weight, accumulated);
    } catch (...) {
      error = std::make_exception_ptr(Error(detail::concat(
          "step ", stats_.steps + 1, ": ", error_message(std::current_exception()))));
    }
    collecting_ = false;
  }
  if (!error && (rows > 0 || accumulated)) {
    // Gradients the observer did not see (several local devices, outputs no node makes, or
    // sums of accumulated batches).
    const auto& grads = trainer_->gradients();
    for (size_t i = 0; i < grads.size(); ++i) reducer_->mark_ready(i, grads[i]);
  }
  StepStatus mine{.failed = static_cast<uint8_t>(error ? 1 : 0),
                  .loss = unsynced_.loss + loss,
                  .compute_seconds = unsynced_.compute_seconds + seconds_since(compute_start),
                  .rows = unsynced_.rows + rows};
  unsynced_ = {};
  auto backward_done = Clock::now();
  reducer_->finish_marking();
  std::vector<StepStatus> all = all_gather_values(*group_, mine);
  reducer_->wait();
  std::vector<bool> failed;
  for (const auto& s : all) failed.push_back(s.failed != 0);
  throw_rank_failures(*group_, failed, error);

  // The global loss: the ranks' weighted losses summed in rank order in the loss's dtype, as
  // DataParallel sums its replicas' (reduce_add).
  double global_loss;
  if (trainer_->training_graph().loss_dtype == DType::Float64) {
    global_loss = all[0].loss;
    for (size_t r = 1; r < all.size(); ++r) global_loss += all[r].loss;
  } else {
    float sum = static_cast<float>(all[0].loss);
    for (size_t r = 1; r < all.size(); ++r) sum += static_cast<float>(all[r].loss);
    global_loss = sum;
  }
  ++stats_.steps;
  for (size_t r = 0; r < all.size(); ++r) {
    stats_.rows[r] += all[r].rows;
    stats_.compute_seconds[r] += all[r].compute_seconds;
  }
  stats_.wait_seconds += seconds_since(backward_done);
  stats_.step_seconds += seconds_since(start);
  stats_.allreduce_bytes += reducer_->bytes_per_step();
  return global_loss;
}

double DistributedDataParallel::step(const std::vector<Tensor>& inputs, const Tensor& target,
                                     int64_t rows, int64_t global_rows, Optimizer& optimizer) {
  double loss = forward_backward(inputs, target, rows, global_rows);
  // Every rank holds the same summed gradients, so every rank clips them alike and, in float16,
  // finds the same overflows and skips the same steps.
  trainer_->update(optimizer, gradients());
  model_->mark_parameters_changed();
  return loss;
}

void DistributedDataParallel::broadcast_buffers() {
  std::vector<Tensor> buffers;
  for (const auto& name : buffers_) buffers.push_back(model_->parameter(name));
  broadcast_from_rank0(*group_, buffers);
  model_->mark_parameters_changed();
}

uint64_t DistributedDataParallel::check_parameters_in_sync() {
  // Each rank's last step updated its in-place state from its own shard: rank 0's is the one
  // kept, as it is the one saved.
  group_->set_stage("after the last step");
  if (options_.broadcast_buffers && !buffers_.empty()) broadcast_buffers();
  uint64_t mine = checksum_parameters(*model_);
  std::vector<uint64_t> all = all_gather_values(*group_, mine);
  for (size_t r = 1; r < all.size(); ++r)
    if (all[r] != all[0])
      throw CollectiveError(detail::concat("the ranks' parameters differ: rank ", r, "'s checksum ",
                                           hex(all[r]), " is not rank 0's ", hex(all[0])));
  return mine;
}

}  // namespace dprun
