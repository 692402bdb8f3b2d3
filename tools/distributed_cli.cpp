#include "tools/distributed_cli.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <set>

#include "engine/distributed/rank_failure.h"
#include "tools/report_files.h"

namespace dprun::cli {

namespace {

std::shared_ptr<ProcessGroup>& active_group() {
  static std::shared_ptr<ProcessGroup> group;
  return group;
}

// The options each rank may be given for itself: they change neither the arithmetic of a step
// nor the collectives, so check_ranks_agree_to_start leaves them out. Every other option of a
// command is compared, so an option added later is compared unless it is listed here.
const std::set<std::string>& per_rank_options() {
  static const std::set<std::string> options = {
      // Where the rank runs its shard: its own devices (hosts may differ) and how its shard is
      // spread over them, which changes only the rounding of the rank's own sums.
      "devices", "output-device", "split-policy", "weights", "threads",
      // Files: each rank may read its copy of the data from its own path (the data is compared
      // by its rows and the inputs' shapes instead), and only rank 0 writes.
      "input", "target", "save", "json", "output-dir", "export-training-graph",
      // Only rank 0 validates, saves checkpoints and reports the throughput.
      "val-input", "val-target", "checkpoint-every", "warmup-steps",
      // How long this rank waits for the others; every rank has --distributed.
      "timeout", "distributed"};
  return options;
}

// An option's value with every number in its shortest form ("0.10" -> "0.1", "1e-3" ->
// "0.001"), so that spellings of one value agree. Numbers are the parts between ',' and '='.
std::string canonical_value(const std::string& text) {
  std::string out, part;
  auto flush = [&] {
    char* end = nullptr;
    const double v = std::strtod(part.c_str(), &end);
    const bool number = !part.empty() && *end == '\0' && std::isfinite(v) &&
                        (std::isdigit(static_cast<unsigned char>(part[0])) || part[0] == '-' ||
                         part[0] == '+' || part[0] == '.');
    if (number) {
      char buffer[64];
      auto result = std::to_chars(buffer, buffer + sizeof buffer, v);
      out.append(buffer, result.ptr);
    } else {
      out += part;
    }
    part.clear();
  };
  for (char c : text) {
    if (c == ',' || c == '=') {
      flush();
      out += c;
    } else {
      part += c;
    }
  }
  flush();
  return out;
}

struct RankFigures {
  double step_seconds = 0, wait_seconds = 0;
  int64_t allreduce_bytes = 0;
};

}  // namespace

void add_distributed_options(CLI::App& app, DistributedFlags& flags, bool training) {
  const std::string group = "distributed (start the ranks with mpirun -np N dprun ...)";
  CLI::Option* distributed = add_flag(
      app, "--distributed", flags.distributed,
      training ? "one rank per process over MPI: rank r takes the rows r, r+N, ... of every "
                 "batch and the gradients are summed over the ranks. Only rank 0 prints and "
                 "writes files"
               : "one rank per process over MPI: the batch is cut over the ranks (rank 0 "
                 "gathers the outputs). Each rank runs on its own --devices; only rank 0 prints "
                 "and writes files");
  std::vector<CLI::Option*> options = {
      distributed, add_number(app, "--timeout", "S", flags.timeout, NumberRule::Positive,
                              "seconds a rank waits for the others before it ends the job (1800)")};
  if (training) {
    options.push_back(add_flag(app, "--deterministic", flags.deterministic,
                               "sum gradients in rank order, bit-identical from run to run"));
    options.push_back(add_number(app, "--bucket-mb", "F", flags.bucket_mb, NumberRule::Positive,
                                 "gradient bucket size in MiB (default 25)"));
    options.push_back(add_text(
        app, "--gradient-compression", "bf16|fp16|none", flags.gradient_compression,
        "send float32 gradients as bfloat16 or float16, half the bytes (PyTorch's bf16/fp16 "
        "compress hooks); default none"));
    options.push_back(add_text(
        app, "--dist-backend", "B", flags.dist_backend,
        "mpi or nccl, what sums the gradients over the ranks (nccl, in GPU memory, when the "
        "first device is a GPU; mpi, in host memory, else)"));
  }
  for (CLI::Option* option : options) {
    option->group(group);
    if (option != distributed) option->needs(distributed);
  }
}

std::vector<RankFact> option_facts(const CLI::App& app) {
  std::vector<RankFact> facts;
  for (const CLI::Option* option : app.get_options()) {
    if (!option->nonpositional()) continue;
    const std::string name = option->get_lnames().front();
    if (per_rank_options().count(name)) continue;
    std::string value;
    if (option->get_items_expected_max() == 0) {  // a flag
      value = option->count() ? "it" : "not";
    } else if (!option->count()) {
      value = "none";
    } else {
      std::vector<std::string> values = option->results();
      for (std::string& v : values) v = canonical_value(v);
      std::sort(values.begin(), values.end());  // the order of repeats does not matter
      for (size_t i = 0; i < values.size(); ++i) value += (i ? " " : "") + values[i];
    }
    facts.push_back({"--" + name, "", value});
  }
  return facts;
}

void check_ranks_agree_to_start(const DistributedRun& run, const Model& model,
                                const std::vector<RankFact>& more) {
  std::vector<RankFact> facts = run.option_facts;
  std::vector<RankFact> of_model = model_facts(model);
  facts.insert(facts.end(), of_model.begin(), of_model.end());
  facts.insert(facts.end(), more.begin(), more.end());
  run.group->set_stage("at start-up");
  check_ranks_agree(*run.group, facts);
  // From here on, collectives belong to the run; a training step names its own stage.
  run.group->set_stage("");
}

std::optional<DistributedRun> start_distributed(const DistributedFlags& flags,
                                                const CLI::App* app) {
  if (!flags.distributed) return std::nullopt;
  const DistributedJobSettings settings{.timeout_seconds = flags.timeout,
                                        .bucket_mb = flags.bucket_mb,
                                        .deterministic = flags.deterministic,
                                        .gradient_compression = flags.gradient_compression};
  if (settings.gradient_compression) try {
      gradient_compression_of(*settings.gradient_compression, OptionSpelling::Flag);
    } catch (const Error& e) {
      throw UsageError(e.what());
    }
  DistributedRun run;
  static_cast<DistributedJob&>(run) = join_distributed_job(settings, OptionSpelling::Flag);
  active_group() = run.group;
  if (app) run.option_facts = option_facts(*app);
  if (!run.is_root() && std::freopen("/dev/null", "w", stdout) == nullptr)
    fail("rank ", run.rank(), ": cannot silence stdout");
  return run;
}

std::vector<Device> rank_devices(const DistributedRun& run,
                                 const std::optional<std::string>& devices_flag,
                                 std::vector<Device> devices) {
  return job_devices(run, devices_flag.value_or("all") == "all", std::move(devices));
}

void choose_gradient_backend(DistributedRun& run, const std::optional<std::string>& backend,
                             Device device) {
  std::string name;
  try {
    name = gradient_backend(backend, device, OptionSpelling::Flag);
  } catch (const Error& e) {
    throw UsageError(e.what());
  }
  use_gradient_backend(run, name, device);
}

int report_error(const std::exception& error, int exit_code) {
  const char* kind = "error: ";  // usage errors too: one prefix for scripts to look for
  const std::shared_ptr<ProcessGroup>& group = active_group();
  if (!group) {
    std::fprintf(stderr, "dprun: %s%s\n", kind, error.what());
    return exit_code;
  }
  if (dynamic_cast<const CollectiveError*>(&error) != nullptr) {
    if (group->rank() == 0) std::fprintf(stderr, "dprun: %s%s\n", kind, error.what());
    return exit_code;
  }
  std::fprintf(stderr, "dprun: %srank %d: %s\n", kind, group->rank(), error.what());
  if (group->size() > 1) group->abort(exit_code);
  return exit_code;
}

JsonReport ranks_json(const DistributedRun& run, const DistributedDataParallel& ddp) {
  const DistributedStats& stats = ddp.stats();
  auto figures = all_gather_values(
      *run.group, RankFigures{stats.step_seconds, stats.wait_seconds, stats.allreduce_bytes});
  // Each rank's cores travel as the JSON text of their list.
  auto all_cores = all_gather_strings(*run.group, JsonReport(run.cores).dump());
  if (!run.is_root()) return nullptr;
  JsonReport ranks;
  ranks["world_size"] = run.size();
  ranks["backend"] = run.group->backend();
  ranks["deterministic"] = run.options.deterministic;
  ranks["gradient_compression"] = run.options.gradient_compression == DType::Float32
                                      ? std::string("none")
                                      : std::string(dtype_name(run.options.gradient_compression));
  ranks["overlaps_backward"] = ddp.overlaps_backward();
  ranks["buckets"] = stats.buckets;
  ranks["cores"] = JsonReport::array();
  for (const std::string& list : all_cores) ranks["cores"].push_back(JsonReport::parse(list));
  ranks["rows"] = stats.rows;
  ranks["samples_per_s"] = JsonReport::array();
  for (size_t r = 0; r < figures.size(); ++r)
    ranks["samples_per_s"].push_back(
        figures[r].step_seconds > 0 ? static_cast<double>(stats.rows[r]) / figures[r].step_seconds
                                    : 0.0);
  ranks["compute_seconds"] = stats.compute_seconds;
  ranks["allreduce_seconds"] = JsonReport::array();
  ranks["allreduce_bytes"] = JsonReport::array();
  for (const RankFigures& f : figures) {
    ranks["allreduce_seconds"].push_back(f.wait_seconds);
    ranks["allreduce_bytes"].push_back(f.allreduce_bytes);
  }
  return ranks;
}

}  // namespace dprun::cli
