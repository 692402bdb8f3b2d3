// `dprun MODEL.onnx`: load, place on the first device, run, print and save outputs.
#include <chrono>
#include <cstdio>
#include <filesystem>

#include "engine/backends/cpu/cpu_backend.h"
#include "engine/parallel/device_list.h"
#include "engine/parallel_for.h"
#include "loader/npy.h"
#include "loader/onnx_loader.h"
#include "tools/cli_args.h"
#include "tools/commands.h"
#include "tools/format.h"
#include "tools/inputs.h"

namespace dprun::cli {

int run_command(int argc, char** argv, int first) {
  Args args(argc, argv, first,
            {{"devices"},
             {"input", true, true},
             {"batch"},
             {"dim", true, true},
             {"output-dir"},
             {"threads"},
             {"iters"}});
  if (args.positionals().size() != 1)
    throw UsageError("expected exactly one model file (see --help)");
  const std::string model_path = args.positionals()[0];
  InputOptions input_options;
  input_options.batch = args.get_int("batch", 1, 1, 1 << 30);
  for (const auto& spec : args.all("dim")) {
    auto [name, value] = split_assignment(spec, "dim");
    int64_t n = parse_int(value, "--dim " + name);
    if (n < 1) throw UsageError("--dim " + name + " must be positive");
    input_options.dims[name] = n;
  }
  for (const auto& spec : args.all("input")) {
    auto [name, path] = split_assignment(spec, "input");
    if (input_options.files.count(name)) throw UsageError("--input '" + name + "' given twice");
    input_options.files[name] = path;
  }
  int threads = static_cast<int>(args.get_int("threads", 0, 1, 1024));
  int iters = static_cast<int>(args.get_int("iters", 1, 1, 1000000));
  std::vector<Device> devices;
  try {
    devices = parse_device_list(args.get("devices").value_or("all"));
  } catch (const Error& e) {
    throw UsageError(std::string("--devices: ") + e.what());
  }
  std::string output_dir = args.get("output-dir").value_or("");

  Device device = devices.front();
  Model model = load_model(model_path, device);
  std::vector<Tensor> inputs = prepare_inputs(model, input_options);
  RunOptions run_options;
  run_options.threads =
      threads > 0
          ? threads
          : static_cast<int>(cpu_core_share(device.index, static_cast<int>(devices.size())).size());

  std::vector<Tensor> outputs;
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) outputs = model.run(inputs, run_options);
  double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count() /
      iters;

  std::printf("model %s on %s\n", model_path.c_str(), device.to_string().c_str());
  auto names = model.input_names();
  for (size_t i = 0; i < inputs.size(); ++i)
    std::printf("  input  %-24s %s\n", names[i].c_str(), inputs[i].describe().c_str());
  auto out_names = model.output_names();
  if (!output_dir.empty()) std::filesystem::create_directories(output_dir);
  for (size_t i = 0; i < outputs.size(); ++i) {
    std::printf("  output %-24s %s %s\n", out_names[i].c_str(), outputs[i].describe().c_str(),
                preview_values(outputs[i]).c_str());
    if (!output_dir.empty())
      write_npy(
          outputs[i],
          (std::filesystem::path(output_dir) / (safe_file_name(out_names[i]) + ".npy")).string());
  }
  std::printf("time: %.3f ms per run (%d run%s)\n", ms, iters, iters == 1 ? "" : "s");
  return 0;
}

}  // namespace dprun::cli
