// `dprun MODEL.onnx`: load the model on the first device, run it data-parallel over the
// device list, print how the batch was split and the gathered outputs, save them.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "engine/autograd/inference_graph.h"
#include "engine/backend.h"
#include "engine/parallel/device_list.h"
#include "engine/warning.h"
#include "loader/npy.h"
#include "loader/onnx_loader.h"
#include "tools/commands.h"
#include "tools/distributed_cli.h"
#include "tools/outputs.h"
#include "tools/parallel_options.h"
#include "tools/report_files.h"
#include "tools/run_distributed.h"

namespace dprun::cli {

namespace {

void write_json(const std::string& path, const DataParallelRun& run,
                const std::vector<std::string>& names, const std::vector<Tensor>& outputs,
                double ms) {
  JsonReport report;
  report["devices_used"] = run.devices_used;
  report["chunk_rows"] = run.chunk_rows;
  report["outputs"] = JsonReport::object();
  report["dtypes"] = JsonReport::object();
  for (size_t i = 0; i < outputs.size(); ++i) {
    report["outputs"][names[i]] = outputs[i].shape();
    report["dtypes"][names[i]] = std::string(dtype_name(outputs[i].dtype()));
  }
  // What each device's allocator held at most since the process started: parameters (a copy
  // per replica), inputs, activations and outputs.
  report["peak_bytes"] = JsonReport::object();
  for (const Device& d : run.devices_used)
    report["peak_bytes"][d.to_string()] = backend_for(d).allocator(d)->stats().peak_in_use;
  report["milliseconds"] = ms;
  write_json_report(path, report);
}

// A graph exported for training runs, but its outputs are not the served model's: say so.
void warn_if_training_form(const Graph& graph, const std::string& path) {
  const std::vector<std::string> nodes = training_mode_nodes(graph);
  if (nodes.empty()) return;
  warn(path + " is in training form: " + std::to_string(nodes.size()) + " node" +
       (nodes.size() == 1 ? "" : "s") + " (" + nodes.front() + (nodes.size() > 1 ? ", ..." : "") +
       ") make the outputs depend on the batch or on chance (BatchNormalization on the "
       "batch's statistics, Dropout); export with model.eval(), or serve the model "
       "`dprun train --save` writes");
}

// Whether input `i` is generated (no --input file) with a symbolic leading dim that no
// --symbol sizes: the inputs whose rows --batch sets.
bool has_generated_batch_dim(const Model& model, const InputOptions& options, size_t i) {
  const TensorType type = model.input_types()[i];
  if (options.files.count(model.input_names()[i]) || !type.shape || type.shape->empty())
    return false;
  const Dim& first = type.shape->front();
  return !first.is_known() && !options.dims.count(first.symbol);
}

// With no --batch, generated inputs split along dim 0 get one row per device, so that every
// device runs: a batch of 1 (torch.chunk's rule) would leave all but the first idle. Returns
// the line that says so, or "" when the batch was given or no generated input has one.
std::string default_batch_per_device(bool batch_given, const Model& model,
                                     const DataParallelOptions& parallel, InputOptions& options) {
  if (batch_given || parallel.dim != 0) return "";
  bool generated = false;
  for (size_t i = 0; i < model.input_names().size(); ++i)
    generated = generated || has_generated_batch_dim(model, options, i);
  if (!generated) return "";
  options.batch = static_cast<int64_t>(parallel.device_ids.size());
  return "generated inputs: batch " + std::to_string(options.batch) +
         ", one row per device (--batch N to choose)\n";
}

// Runs `parallel` `iters` times on `inputs`, keeping the last outputs; the mean milliseconds.
double timed_runs(DataParallel& parallel, const std::vector<Tensor>& inputs, int iters,
                  std::vector<Tensor>& outputs) {
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) outputs = parallel.forward(inputs);
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
             .count() /
         iters;
}

struct RunFlags {
  std::string model;
  DeviceFlags devices;
  InputFlags inputs;
  std::optional<std::string> precision, output_dir, json;
  std::optional<int64_t> iters;
  DistributedFlags distributed;
};

std::unique_ptr<CLI::App> run_app(RunFlags& flags) {
  auto app = command_app(
      "usage: dprun [run] MODEL.onnx [options]\n"
      "run a model data-parallel over the devices and print its outputs",
      kTestingAids);
  add_model_path(*app, flags.model);
  add_device_options(*app, flags.devices);
  add_precision_option(*app, flags.precision, kConvertPrecisionHelp);
  add_input_options(*app, flags.inputs);
  const std::string group = "run only";
  add_text(*app, "--output-dir", "DIR", flags.output_dir, "write each output to DIR/NAME.npy")
      ->group(group);
  add_text(*app, "--json", "FILE", flags.json,
           "write devices_used, chunk_rows, output shapes and each device's peak_bytes as JSON")
      ->group(group);
  add_integer(*app, "--iters", "N", flags.iters, 1, 1000000,
              "after a first run (timed apart: it includes the setup), run N times and report "
              "the mean time (default 1)")
      ->group(group);
  add_distributed_options(*app, flags.distributed, false);
  return app;
}

int run(const RunFlags& flags, const CLI::App& app) {
  const std::string& model_path = flags.model;
  // Before the devices are parsed: the ranks on a host share its cores.
  std::optional<DistributedRun> dist = start_distributed(flags.distributed, &app);
  DataParallelOptions options = parallel_options(flags.devices);
  if (dist) options.device_ids = rank_devices(*dist, flags.devices.devices, options.device_ids);
  InputOptions input_options = cli::input_options(flags.inputs);
  const int iters = static_cast<int>(flags.iters.value_or(1));
  const std::string output_dir = flags.output_dir.value_or("");
  const std::string json_path = flags.json.value_or("");
  const ModelOptions compile = model_options(flags.devices, flags.precision);
  if (dist)
    return run_on_ranks(*dist, model_path, compile, options, input_options, iters, output_dir,
                        json_path);

  auto model =
      std::make_shared<Model>(load_model(model_path, options.device_ids.front(), {}, compile));
  warn_if_training_form(model->graph(), model_path);
  const std::string batch_note =
      default_batch_per_device(flags.inputs.batch.has_value(), *model, options, input_options);
  std::vector<Tensor> inputs =
      pin_for_devices(prepare_inputs(*model, input_options), options.device_ids);
  DataParallel parallel(model, options);

  // The first run builds replicas, buffers and kernels: timed apart from the `iters` after it.
  std::vector<Tensor> outputs;
  double first_ms = 0, ms = 0;
  try {
    first_ms = timed_runs(parallel, inputs, 1, outputs);
    ms = timed_runs(parallel, inputs, iters, outputs);
  } catch (const std::exception& e) {
    rethrow_noting_generated(e, generated_input_names(*model, input_options));
  }
  DataParallelRun run = parallel.last_run();

  std::printf("model %s on %s\n", model_path.c_str(),
              device_list_to_string(options.device_ids).c_str());
  auto names = model->input_names();
  for (size_t i = 0; i < inputs.size(); ++i)
    std::printf("  input  %-24s %s\n", names[i].c_str(), inputs[i].describe().c_str());
  std::fputs(batch_note.c_str(), stdout);
  std::printf("split along dim %lld (%s):\n", static_cast<long long>(options.dim),
              options.split_policy == SplitPolicy::Chunk  ? "chunk"
              : options.split_policy == SplitPolicy::Even ? "even"
                                                          : "weighted");
  for (size_t i = 0; i < run.devices_used.size(); ++i)
    std::printf("  %-8s %lld rows\n", run.devices_used[i].to_string().c_str(),
                static_cast<long long>(i < run.chunk_rows.size() ? run.chunk_rows[i] : 0));
  auto out_names = model->output_names();
  report_outputs(out_names, outputs, output_dir);
  if (!json_path.empty()) write_json(json_path, run, out_names, outputs, ms);
  std::printf("time: %.3f ms per run (%d run%s; first run %.3f ms, including setup)\n", ms, iters,
              iters == 1 ? "" : "s", first_ms);
  return 0;
}

}  // namespace

int run_command(int argc, char** argv, int first) {
  RunFlags flags;
  auto app = run_app(flags);
  parse_command_line(*app, argc, argv, first);
  return run(flags, *app);
}

std::string run_help() {
  RunFlags flags;
  return command_help(*run_app(flags));
}

}  // namespace dprun::cli
