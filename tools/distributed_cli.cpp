#include "tools/distributed_cli.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <sstream>

#include "engine/comm/host_cores.h"
#include "engine/comm/mpi_process_group.h"
#include "engine/comm/nccl_process_group.h"
#include "engine/comm/rank_failure.h"
#include "tools/format.h"

namespace dprun::cli {

namespace {

std::shared_ptr<ProcessGroup>& active_group() {
  static std::shared_ptr<ProcessGroup> group;
  return group;
}

double positive_number(const Args& args, const char* name) {
  std::string text = *args.get(name);
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !std::isfinite(v) || v <= 0)
    throw UsageError(std::string("--") + name + " must be a positive number, got '" + text + "'");
  return v;
}

template <class T>
void json_list(std::ostringstream& out, const char* name, const std::vector<T>& values) {
  out << ",\n    \"" << name << "\": [";
  for (size_t i = 0; i < values.size(); ++i) out << (i ? ", " : "") << values[i];
  out << "]";
}

struct RankFigures {
  double step_seconds = 0, wait_seconds = 0;
  int64_t allreduce_bytes = 0;
};

}  // namespace

std::vector<OptionSpec> distributed_option_specs(bool training) {
  std::vector<OptionSpec> specs = {{"distributed", false}, {"timeout"}};
  if (training)
    specs.insert(
        specs.end(),
        {{"deterministic", false}, {"bucket-mb"}, {"dist-backend"}, {"gradient-compression"}});
  return specs;
}

std::optional<DistributedRun> start_distributed(const Args& args) {
  if (!args.has("distributed")) {
    for (const char* name :
         {"deterministic", "bucket-mb", "timeout", "dist-backend", "gradient-compression"})
      if (args.has(name)) throw UsageError(std::string("--") + name + " needs --distributed");
    return std::nullopt;
  }
  DistributedRun run;
  ProcessGroupOptions& group_options = run.group_options;
  if (args.has("timeout")) group_options.timeout_seconds = positive_number(args, "timeout");
  if (args.has("bucket-mb"))
    run.options.bucket_bytes =
        static_cast<size_t>(std::ceil(positive_number(args, "bucket-mb") * 1024 * 1024));
  run.options.deterministic = args.has("deterministic");
  if (auto compression = args.get("gradient-compression")) {
    if (*compression == "bf16" || *compression == "bfloat16")
      run.options.gradient_compression = DType::BFloat16;
    else if (*compression == "fp16" || *compression == "float16")
      run.options.gradient_compression = DType::Float16;
    else if (*compression != "none")
      throw UsageError("--gradient-compression must be bf16, fp16 or none, got '" + *compression +
                       "'");
  }
  run.group = mpi_world_process_group(group_options);
  active_group() = run.group;
  run.local = local_ranks(*run.group);
  run.cores = share_host_cores(*run.group, run.local);
  if (!run.is_root() && std::freopen("/dev/null", "w", stdout) == nullptr)
    fail("rank ", run.rank(), ": cannot silence stdout");
  return run;
}

std::vector<Device> rank_devices(const DistributedRun& run, const Args& args,
                                 std::vector<Device> devices) {
  const bool all = args.get("devices").value_or("all") == "all";
  if (!all || devices.empty() || devices.front().type != DeviceType::CUDA) return devices;
  return local_share(devices, run.local);
}

void choose_gradient_backend(DistributedRun& run, const Args& args, Device device) {
  const bool gpu = device.type == DeviceType::CUDA;
  const std::string name =
      args.get("dist-backend").value_or(gpu && nccl_supported() ? "nccl" : "mpi");
  if (name == "mpi") return;
  if (name != "nccl") throw UsageError("--dist-backend must be mpi or nccl, got '" + name + "'");
  if (!gpu)
    throw UsageError(
        "--dist-backend nccl sums gradients in GPU memory: the first device must "
        "be a GPU (cuda:N), not " +
        device.to_string());
  run.group = nccl_process_group(run.group, device, run.group_options);
}

int report_error(const std::exception& error, int exit_code) {
  const char* kind = exit_code == 2 ? "" : "error: ";
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

void check_same_on_every_rank(ProcessGroup& group,
                              const std::vector<std::pair<std::string, int64_t>>& facts) {
  std::vector<int64_t> mine;
  for (const auto& fact : facts) mine.push_back(fact.second);
  auto bytes = group.all_gather(std::span<const uint8_t>(
      reinterpret_cast<const uint8_t*>(mine.data()), mine.size() * sizeof(int64_t)));
  std::vector<int64_t> all(bytes.size() / sizeof(int64_t));
  std::memcpy(all.data(), bytes.data(), bytes.size());
  for (int r = 1; r < group.size(); ++r)
    for (size_t f = 0; f < facts.size(); ++f) {
      int64_t theirs = all[static_cast<size_t>(r) * facts.size() + f];
      if (theirs != all[f])
        throw CollectiveError(detail::concat("rank ", r, " has ", theirs, " ", facts[f].first,
                                             ", rank 0 has ", all[f],
                                             "; every rank must be given the same"));
    }
}

std::string ranks_json(const DistributedRun& run, const DistributedDataParallel& ddp) {
  const DistributedStats& stats = ddp.stats();
  auto figures = all_gather_values(
      *run.group, RankFigures{stats.step_seconds, stats.wait_seconds, stats.allreduce_bytes});
  std::string cores;
  for (int c : run.cores) {
    if (!cores.empty()) cores += ',';
    cores += std::to_string(c);
  }
  auto all_cores = all_gather_strings(*run.group, cores);
  if (!run.is_root()) return "";
  std::vector<double> samples_per_s, wait_seconds;
  std::vector<int64_t> bytes;
  std::vector<std::string> core_lists;
  for (size_t r = 0; r < figures.size(); ++r) {
    samples_per_s.push_back(figures[r].step_seconds > 0
                                ? static_cast<double>(stats.rows[r]) / figures[r].step_seconds
                                : 0.0);
    wait_seconds.push_back(figures[r].wait_seconds);
    bytes.push_back(figures[r].allreduce_bytes);
    core_lists.push_back("[" + all_cores[r] + "]");
  }
  std::ostringstream out;
  out.precision(9);
  out << "{\n    \"world_size\": " << run.size()
      << ",\n    \"backend\": " << json_string(run.group->backend())
      << ",\n    \"deterministic\": " << (run.options.deterministic ? "true" : "false")
      << ",\n    \"gradient_compression\": "
      << json_string(run.options.gradient_compression == DType::Float32
                         ? std::string("none")
                         : std::string(dtype_name(run.options.gradient_compression)))
      << ",\n    \"overlaps_backward\": " << (ddp.overlaps_backward() ? "true" : "false")
      << ",\n    \"buckets\": " << stats.buckets;
  json_list(out, "cores", core_lists);
  json_list(out, "rows", stats.rows);
  json_list(out, "samples_per_s", samples_per_s);
  json_list(out, "compute_seconds", stats.compute_seconds);
  json_list(out, "allreduce_seconds", wait_seconds);
  json_list(out, "allreduce_bytes", bytes);
  out << "\n  }";
  return out.str();
}

}  // namespace dprun::cli
