// `dprun bench MODEL.onnx`: throughput of data-parallel inference over a device list, with a
// per-device breakdown, the spread of step times, and (--sweep) the scaling table over 1..N
// devices; --rounds repeats the timing, interleaving the device lists, and keeps each one's best.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "engine/backend.h"
#include "engine/parallel/device_list.h"
#include "engine/plan_graphs.h"
#include "engine/warning.h"
#include "loader/onnx_loader.h"
#include "tools/bench_rounds.h"
#include "tools/commands.h"
#include "tools/distributed_cli.h"
#include "tools/parallel_options.h"
#include "tools/profile_report.h"
#include "tools/report_files.h"
#include "tools/run_distributed.h"

namespace dprun::cli {

namespace {

// The best round's per-device rows, then the step-time spread and the headline line (last, for
// scripts: "MS ms per iteration, N samples/s").
void print_result(const BenchResult& result) {
  const RoundResult& best = result.best();
  std::printf("%-10s %8s %12s %8s\n", "device", "rows", "busy ms/it", "share");
  for (const auto& f : best.per_device)
    std::printf("%-10s %8lld %12.3f %7.1f%%\n", f.device.to_string().c_str(),
                static_cast<long long>(f.rows), f.busy_ms,
                best.ms_per_iter > 0 ? 100.0 * f.busy_ms / best.ms_per_iter : 0.0);
  const StepSpread spread = result.spread();
  std::printf("step ms: median %.4f, p10 %.4f, p90 %.4f over %zu steps\n", spread.median,
              spread.p10, spread.p90, spread.steps);
  if (result.rounds.size() > 1) {
    std::printf("rounds (samples/s, the best kept):");
    for (const RoundResult& r : result.rounds) std::printf(" %.1f", r.samples_per_s);
    std::printf("\n");
  }
  std::printf("%.3f ms per iteration, %.1f samples/s\n", best.ms_per_iter, best.samples_per_s);
}

// Each round's samples per second, for the JSON.
std::vector<double> round_rates(const std::vector<RoundResult>& rounds) {
  std::vector<double> rates;
  for (const RoundResult& r : rounds) rates.push_back(r.samples_per_s);
  return rates;
}

// The speed-up of sweep row k over one device, from the median step times the table shows
// (a mean would let a few slow steps turn a halved median into a slow-down).
double median_speedup(const std::vector<const BenchResult*>& scaling, size_t k) {
  const double base = scaling[0]->median_samples_per_s();
  return base > 0 ? scaling[k]->median_samples_per_s() / base : 0;
}

JsonReport json_result(const std::string& model_path, int64_t batch, int iters, int warmup,
                       int threads, const BenchResult& main,
                       const std::vector<const BenchResult*>& scaling) {
  const RoundResult& best = main.best();
  const StepSpread spread = main.spread();
  JsonReport report;
  report["model"] = model_path;
  report["batch"] = batch;
  report["iters"] = iters;
  report["warmup"] = warmup;
  report["rounds"] = main.rounds.size();
  report["threads"] = threads;
  report["devices"] = main.devices;
  report["samples_per_s"] = best.samples_per_s;
  report["ms_per_iter"] = best.ms_per_iter;
  report["round_samples_per_s"] = round_rates(main.rounds);
  report["step_ms"] = {
      {"p10", spread.p10}, {"median", spread.median}, {"p90", spread.p90}, {"steps", spread.steps}};
  report["per_device"] = JsonReport::array();
  for (const auto& f : best.per_device)
    report["per_device"].push_back({
        {"device", f.device},
        {"rows", f.rows},
        {"busy_ms", f.busy_ms},
        {"share", best.ms_per_iter > 0 ? f.busy_ms / best.ms_per_iter : 0},
        // What the device's allocator held at most since the process started (every list of
        // a sweep, the warm-up and the profile pass included).
        {"peak_bytes", backend_for(f.device).allocator(f.device)->stats().peak_in_use},
    });
  if (scaling.empty()) return report;
  report["sweep"] = JsonReport::array();
  for (size_t k = 0; k < scaling.size(); ++k) {
    const double speedup = median_speedup(scaling, k);
    report["sweep"].push_back({
        {"devices", k + 1},
        {"samples_per_s", scaling[k]->best().samples_per_s},
        {"median_samples_per_s", scaling[k]->median_samples_per_s()},
        {"round_samples_per_s", round_rates(scaling[k]->rounds)},
        {"median_step_ms", scaling[k]->spread().median},
        {"speedup", speedup},
        {"efficiency", speedup / static_cast<double>(k + 1)},
    });
  }
  return report;
}

// The device lists to time: the given one, then with --sweep its first 1..N-1 devices (the
// sweep's N devices are the given list itself, so no device holds a second replica of it); all
// warmed, then timed `rounds` times in turn so that a change in the machine's load falls on
// every list alike.
std::vector<std::unique_ptr<DeviceListBench>> time_device_lists(const std::shared_ptr<Model>& model,
                                                                const DataParallelOptions& options,
                                                                const std::vector<Tensor>& inputs,
                                                                int warmup, int iters, int rounds,
                                                                bool sweep) {
  std::vector<std::unique_ptr<DeviceListBench>> benches;
  benches.push_back(std::make_unique<DeviceListBench>(model, options, inputs));
  for (size_t k = 1; sweep && k < options.device_ids.size(); ++k) {
    DataParallelOptions subset = options;
    subset.device_ids.assign(options.device_ids.begin(),
                             options.device_ids.begin() + static_cast<long>(k));
    if (!subset.weights.empty()) subset.weights.resize(k);
    benches.push_back(std::make_unique<DeviceListBench>(model, subset, inputs));
  }
  auto label = [&](size_t b, const char* what) {
    return b == 0 ? std::string(what) : "sweep " + std::to_string(b);
  };
  for (size_t b = 0; b < benches.size(); ++b) benches[b]->warm(warmup, label(b, "warm-up").c_str());
  for (int r = 0; r < rounds; ++r)
    for (size_t b = 0; b < benches.size(); ++b)
      benches[b]->time_round(iters, label(b, "bench").c_str());
  return benches;
}

// A separate pass with per-node observers (they add a little time to every node), then the
// per-op and per-node tables asked for.
void profile_pass(const std::shared_ptr<Model>& model, const DataParallelOptions& options,
                  const std::vector<Tensor>& inputs, int iters, bool by_op, bool by_node) {
  NodeProfile profile;
  DataParallelOptions observed = options;
  observed.observers.push_back(profile.observer());
  DeviceListBench(model, observed, inputs).time_round(iters, "profile");
  if (by_op) print_op_table(profile, iters);
  if (by_node) print_node_table(profile, iters);
}

// Every column from the median step time, so that the speed-up agrees with the step times.
void print_sweep(const std::vector<const BenchResult*>& scaling) {
  std::printf("\n%-8s %12s %9s %11s %15s\n", "devices", "samples/s", "speed-up", "efficiency",
              "median step ms");
  for (size_t k = 0; k < scaling.size(); ++k) {
    const double speedup = median_speedup(scaling, k);
    std::printf("%-8zu %12.1f %8.2fx %10.1f%% %15.4f\n", k + 1, scaling[k]->median_samples_per_s(),
                speedup, 100.0 * speedup / static_cast<double>(k + 1), scaling[k]->spread().median);
  }
  std::printf("(samples/s, speed-up and efficiency at the median step time)\n");
}

// The line that says --batch was not what ran: a model of fixed batch, or inputs from files.
void warn_if_batch_ignored(const InputFlags& given, const std::string& model_path, int64_t batch,
                           int64_t rows, bool batch_sizes_an_input) {
  if (!given.batch || rows == batch) return;
  const std::string ran =
      "each step runs " + std::to_string(rows) + " row" + (rows == 1 ? "" : "s");
  const std::string ignored = "--batch " + std::to_string(batch) + " ignored";
  if (batch_sizes_an_input) {
    warn(ignored + ": " + ran);
  } else if (!given.files.empty()) {
    warn(ignored + ": the inputs have no generated batch dim, " + ran + " (the rows of the " +
         "--input files)");
  } else {
    warn(model_path + " has a fixed batch of " + std::to_string(rows) + ": " + ignored + ", " +
         ran);
  }
}

struct BenchFlags {
  std::string model;
  DeviceFlags devices;
  InputFlags inputs;
  std::optional<std::string> precision, json;
  std::optional<int64_t> iters, warmup, rounds;
  bool sweep = false, profile = false, profile_nodes = false;
  DistributedFlags distributed;
};

std::unique_ptr<CLI::App> bench_app(BenchFlags& flags) {
  auto app = command_app(
      "usage: dprun bench MODEL.onnx [options]\n"
      "measure throughput: samples/s counts the rows each step ran",
      kTestingAids);
  add_model_path(*app, flags.model);
  add_device_options(*app, flags.devices);
  add_precision_option(*app, flags.precision, kConvertPrecisionHelp);
  add_input_options(*app, flags.inputs);
  const std::string group = "bench only";
  const std::vector<CLI::Option*> options = {
      add_integer(*app, "--iters", "N", flags.iters, 1, 1000000, "timed iterations (default 20)"),
      add_integer(*app, "--warmup", "N", flags.warmup, 0, 1000000,
                  "untimed iterations before them (default 3)"),
      add_integer(*app, "--rounds", "N", flags.rounds, 1, 1000,
                  "time N rounds of --iters and keep the best (default 1); with --sweep, the "
                  "device lists take their rounds in turn"),
      add_flag(*app, "--sweep", flags.sweep,
               "also run on the first 1..N devices and print the scaling table (its speed-up "
               "compares median step times)"),
      add_flag(*app, "--profile", flags.profile,
               "also print the time per op type (summed over devices)"),
      add_flag(*app, "--profile-nodes", flags.profile_nodes,
               "also print the time of each node, in execution order, with the input shapes of "
               "its first call"),
      add_text(*app, "--json", "FILE", flags.json,
               "write samples_per_s, each round's, the step-time spread, batch (the rows a step "
               "ran), iters, devices and per-device figures")};
  for (CLI::Option* option : options) option->group(group);
  add_distributed_options(*app, flags.distributed, false);
  // A distributed bench times the ranks' steps together, one round, without per-node timers.
  for (const char* single_process : {"--profile", "--profile-nodes", "--rounds"})
    app->get_option(single_process)->excludes("--distributed");
  return app;
}

int bench(const BenchFlags& flags, const CLI::App& app) {
  const std::string& model_path = flags.model;
  // Before the devices are parsed: the ranks on a host share its cores.
  std::optional<DistributedRun> dist = start_distributed(flags.distributed, &app);
  DataParallelOptions options = parallel_options(flags.devices);
  if (dist) options.device_ids = rank_devices(*dist, flags.devices.devices, options.device_ids);
  InputOptions input_options = cli::input_options(flags.inputs);
  const int iters = static_cast<int>(flags.iters.value_or(20));
  const int warmup = static_cast<int>(flags.warmup.value_or(3));
  const int rounds = static_cast<int>(flags.rounds.value_or(1));
  const bool sweep = flags.sweep;
  const ModelOptions compile = model_options(flags.devices, flags.precision);
  if (dist)
    return bench_on_ranks(*dist, model_path, compile, options, input_options, warmup, iters, sweep,
                          flags.json.value_or(""));

  auto model =
      std::make_shared<Model>(load_model(model_path, options.device_ids.front(), {}, compile));
  std::vector<Tensor> inputs =
      pin_for_devices(prepare_inputs(*model, input_options), options.device_ids);

  std::vector<std::unique_ptr<DeviceListBench>> benches;
  try {
    benches = time_device_lists(model, options, inputs, warmup, iters, rounds, sweep);
  } catch (const std::exception& e) {
    rethrow_noting_generated(e, generated_input_names(*model, input_options));
  }
  if (flags.profile || flags.profile_nodes)
    profile_pass(model, options, inputs, iters, flags.profile, flags.profile_nodes);
  const BenchResult& main = benches[0]->result();
  const int64_t batch = main.best().rows_per_step;  // what ran, not what was asked
  warn_if_batch_ignored(flags.inputs, model_path, input_options.batch, batch,
                        batch_sizes_an_input(*model, input_options));
  std::printf("model %s, batch %lld, %d iterations", model_path.c_str(),
              static_cast<long long>(batch), iters);
  if (rounds > 1) std::printf(" x %d rounds", rounds);
  std::printf(" (+%d warm-up)\n", warmup);
  print_result(main);
  std::optional<GraphStats> graphs;
  if (PlanGraphs::enabled_for(options.device_ids.front())) {
    graphs = benches[0]->graph_stats();
    std::printf("CUDA graphs: %lld captured, %lld replays, %lld fallbacks%s%s\n",
                static_cast<long long>(graphs->captures), static_cast<long long>(graphs->replays),
                static_cast<long long>(graphs->fallbacks),
                graphs->last_fallback.empty() ? "" : "; the last: ", graphs->last_fallback.c_str());
  }
  std::vector<const BenchResult*> scaling;  // 1..N devices, the given list last
  for (size_t b = 1; b < benches.size(); ++b) scaling.push_back(&benches[b]->result());
  if (sweep) scaling.push_back(&main);
  if (!scaling.empty()) print_sweep(scaling);
  if (const auto& path = flags.json) {
    JsonReport report =
        json_result(model_path, batch, iters, warmup, options.threads, main, scaling);
    if (graphs)
      report["cuda_graphs"] = {{"captures", graphs->captures},
                               {"replays", graphs->replays},
                               {"fallbacks", graphs->fallbacks},
                               {"last_fallback", graphs->last_fallback}};
    write_json_report(*path, report);
  }
  return 0;
}

}  // namespace

int bench_command(int argc, char** argv, int first) {
  BenchFlags flags;
  auto app = bench_app(flags);
  parse_command_line(*app, argc, argv, first);
  return bench(flags, *app);
}

std::string bench_help() {
  BenchFlags flags;
  return command_help(*bench_app(flags));
}

}  // namespace dprun::cli
