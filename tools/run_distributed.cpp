#include "tools/run_distributed.h"

#include <chrono>
#include <cstdio>
#include <filesystem>

#include "engine/distributed/rank_failure.h"
#include "engine/distributed/tensor_bytes.h"
#include "engine/parallel/device_list.h"
#include "engine/parallel/gather.h"
#include "loader/npy.h"
#include "loader/onnx_loader.h"
#include "tools/outputs.h"
#include "tools/rank_slices.h"
#include "tools/report_files.h"

namespace dprun::cli {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// What every rank sets up: the model, its inputs, and this rank's chunk of them.
struct RankWork {
  std::shared_ptr<Model> model;
  std::vector<std::string> names;
  std::vector<Tensor> inputs;  // the whole batch, the same on every rank
  std::unique_ptr<DataParallel> parallel;

  RankWork(const std::string& model_path, const ModelOptions& model_options,
           const DataParallelOptions& options, const InputOptions& input_options) {
    model = std::make_shared<Model>(
        load_model(model_path, options.device_ids.front(), {}, model_options));
    names = model->input_names();
    inputs = prepare_inputs(*model, input_options);
    parallel = std::make_unique<DataParallel>(model, options);
  }

  // What every rank must hold alike besides the options and the model: the inputs' shapes
  // and dtypes, and the rows of the batch.
  std::vector<RankFact> agreed_facts(int64_t batch) const {
    std::vector<RankFact> facts = tensor_facts("the inputs", "input", names, inputs);
    facts.push_back({"the rows in the batch", "", std::to_string(batch)});
    return facts;
  }
};

}  // namespace

int run_on_ranks(const DistributedRun& run, const std::string& model_path,
                 const ModelOptions& model_options, const DataParallelOptions& options,
                 const InputOptions& input_options, int iters, const std::string& output_dir,
                 const std::string& json_path) {
  RankWork work(model_path, model_options, options, input_options);
  RankSlices slices = slice_over_ranks(work.inputs, work.names, options, run.size());
  check_ranks_agree_to_start(run, *work.model, work.agreed_facts(slices.batch));
  auto r = static_cast<size_t>(run.rank());
  std::vector<Tensor> mine =
      chunk_inputs(work.inputs, work.names, options, slices.starts[r], slices.rows[r]);

  std::vector<Tensor> outputs;
  auto start = Clock::now();
  for (int i = 0; i < iters; ++i) {
    std::vector<uint8_t> bytes;
    std::exception_ptr error;
    try {
      if (slices.rows[r] > 0) bytes = pack_tensors(work.parallel->forward(mine));
    } catch (...) {
      error = std::current_exception();
    }
    throw_if_any_rank_failed(*run.group, error);
    auto parts = run.group->gather(bytes, 0);
    if (!run.is_root()) continue;
    std::vector<std::vector<Tensor>> per_rank;
    for (size_t k = 0; k < parts.size(); ++k)
      if (slices.rows[k] > 0) per_rank.push_back(unpack_tensors(parts[k]));
    outputs = gather(per_rank, Device::cpu(0), options.dim);
  }
  double ms = seconds_since(start) * 1e3 / iters;
  if (!run.is_root()) return 0;

  std::printf("model %s on %d ranks, each on %s\n", model_path.c_str(), run.size(),
              device_list_to_string(options.device_ids).c_str());
  for (size_t i = 0; i < work.inputs.size(); ++i)
    std::printf("  input  %-24s %s\n", work.names[i].c_str(), work.inputs[i].describe().c_str());
  std::printf("split along dim %lld over %d ranks (even):\n", static_cast<long long>(options.dim),
              run.size());
  for (size_t k = 0; k < slices.rows.size(); ++k)
    std::printf("  rank %-4zu %lld rows\n", k, static_cast<long long>(slices.rows[k]));
  auto out_names = work.model->output_names();
  report_outputs(out_names, outputs, output_dir);
  if (!json_path.empty()) {
    JsonReport report;
    report["ranks"] = {{"world_size", run.size()}, {"rows", slices.rows}};
    report["outputs"] = JsonReport::object();
    report["dtypes"] = JsonReport::object();
    for (size_t i = 0; i < outputs.size(); ++i) {
      report["outputs"][out_names[i]] = outputs[i].shape();
      report["dtypes"][out_names[i]] = std::string(dtype_name(outputs[i].dtype()));
    }
    report["milliseconds"] = ms;
    write_json_report(json_path, report);
  }
  std::printf("time: %.3f ms per run (%d run%s)\n", ms, iters, iters == 1 ? "" : "s");
  return 0;
}

namespace {

struct Round {
  double seconds = 0;         // wall time of the round, waiting for the slowest rank
  std::vector<double> busy;   // per rank: its own runs
  std::vector<int64_t> rows;  // per rank
};

// `warmup` + `iters` runs of this rank's chunk when the batch is cut over the first `ranks`
// ranks (the others wait), timed between two exchanges.
Round timed_round(const DistributedRun& run, RankWork& work, const DataParallelOptions& options,
                  int ranks, int warmup, int iters) {
  RankSlices slices = slice_over_ranks(work.inputs, work.names, options, ranks);
  auto r = static_cast<size_t>(run.rank());
  int64_t rows = r < slices.rows.size() ? slices.rows[r] : 0;
  std::vector<Tensor> mine;
  if (rows > 0) mine = chunk_inputs(work.inputs, work.names, options, slices.starts[r], rows);
  std::exception_ptr error;
  try {
    for (int i = 0; i < warmup && rows > 0; ++i) work.parallel->forward(mine);
  } catch (...) {
    error = std::current_exception();
  }
  throw_if_any_rank_failed(*run.group, error);  // also lines the ranks up
  auto start = Clock::now();
  try {
    for (int i = 0; i < iters && rows > 0; ++i) work.parallel->forward(mine);
  } catch (...) {
    error = std::current_exception();
  }
  double busy = seconds_since(start);
  throw_if_any_rank_failed(*run.group, error);
  Round round;
  round.seconds = seconds_since(start);
  round.busy = all_gather_values(*run.group, busy);
  round.rows = slices.rows;
  return round;
}

}  // namespace

int bench_on_ranks(const DistributedRun& run, const std::string& model_path,
                   const ModelOptions& model_options, const DataParallelOptions& options,
                   const InputOptions& input_options, int warmup, int iters, bool sweep,
                   const std::string& json_path) {
  RankWork work(model_path, model_options, options, input_options);
  int64_t batch = slice_over_ranks(work.inputs, work.names, options, run.size()).batch;
  check_ranks_agree_to_start(run, *work.model, work.agreed_facts(batch));
  Round main = timed_round(run, work, options, run.size(), warmup, iters);
  std::vector<Round> scaling;
  if (sweep)
    for (int k = 1; k <= run.size(); ++k)
      scaling.push_back(timed_round(run, work, options, k, warmup, iters));
  if (!run.is_root()) return 0;

  auto samples_per_s = [&](const Round& round) {
    return static_cast<double>(batch) * iters / round.seconds;
  };
  double ms = main.seconds * 1e3 / iters;
  std::printf("model %s, batch %lld over %d ranks, each on %s, %d iterations (+%d warm-up)\n",
              model_path.c_str(), static_cast<long long>(batch), run.size(),
              device_list_to_string(options.device_ids).c_str(), iters, warmup);
  std::printf("%-6s %8s %12s %8s\n", "rank", "rows", "busy ms/it", "share");
  for (size_t k = 0; k < main.rows.size(); ++k)
    std::printf("%-6zu %8lld %12.3f %7.1f%%\n", k, static_cast<long long>(main.rows[k]),
                main.busy[k] * 1e3 / iters, 100.0 * main.busy[k] / main.seconds);
  std::printf("%.3f ms per iteration, %.1f samples/s\n", ms, samples_per_s(main));
  if (sweep) {
    std::printf("\n%-8s %12s %9s %11s\n", "ranks", "samples/s", "speed-up", "efficiency");
    for (size_t k = 0; k < scaling.size(); ++k) {
      double speedup = samples_per_s(scaling[k]) / samples_per_s(scaling[0]);
      std::printf("%-8zu %12.1f %8.2fx %10.1f%%\n", k + 1, samples_per_s(scaling[k]), speedup,
                  100.0 * speedup / static_cast<double>(k + 1));
    }
  }
  if (!json_path.empty()) {
    JsonReport report;
    report["model"] = model_path;
    report["batch"] = batch;
    report["iters"] = iters;
    report["warmup"] = warmup;
    report["world_size"] = run.size();
    report["devices"] = options.device_ids;
    report["samples_per_s"] = samples_per_s(main);
    report["ms_per_iter"] = ms;
    report["per_rank"] = JsonReport::array();
    for (size_t k = 0; k < main.rows.size(); ++k)
      report["per_rank"].push_back({{"rank", k},
                                    {"rows", main.rows[k]},
                                    {"busy_ms", main.busy[k] * 1e3 / iters},
                                    {"share", main.busy[k] / main.seconds}});
    if (sweep) {
      report["sweep"] = JsonReport::array();
      for (size_t k = 0; k < scaling.size(); ++k) {
        const double speedup = samples_per_s(scaling[k]) / samples_per_s(scaling[0]);
        report["sweep"].push_back({{"ranks", k + 1},
                                   {"samples_per_s", samples_per_s(scaling[k])},
                                   {"speedup", speedup},
                                   {"efficiency", speedup / static_cast<double>(k + 1)}});
      }
    }
    write_json_report(json_path, report);
  }
  return 0;
}

}  // namespace dprun::cli
