#include "tools/parallel_options.h"

#include <sstream>

#include "engine/backend.h"
#include "engine/parallel/device_list.h"
#include "tools/typo_hints.h"

namespace dprun::cli {

namespace {
/// Resolves every device named by the options to its backend. Throws Error (exit status 1)
/// for a device that cannot be used: "device cuda:0: this build of dprun has no CUDA
/// support", "device cuda:0: no CUDA GPU is present".
void check_devices_have_backends(const DataParallelOptions& options) {
  for (const Device& d : options.device_ids) backend_for(d).check_device(d);
  if (options.output_device)
    backend_for(*options.output_device).check_device(*options.output_device);
}

/// " (did you mean cuda:0?)" for the first item of the device list `list` that is no device
/// and is close to one; "" otherwise.
std::string device_hint(const std::string& list) {
  std::stringstream items(list);
  for (std::string item; std::getline(items, item, ',');) {
    try {
      Device::parse(item);
      continue;
    } catch (const Error&) {
    }
    const auto suggestion = suggest_device(item);
    return suggestion ? " (did you mean " + *suggestion + "?)" : "";
  }
  return "";
}
}  // namespace

void add_device_options(CLI::App& app, DeviceFlags& flags) {
  add_text(app, "--devices", "LIST", flags.devices,
           "all | cpu | cpu:0,cpu:1,... | cuda:0,cuda:1,... or bare CUDA ids 0,1 (default: all, "
           "every GPU when there is one, else one CPU device per core; cpu means one CPU device "
           "per core). CUDA devices are refused with exit status 1 by a build without CUDA or "
           "where no GPU is present");
  add_integer(app, "--dim", "D", flags.dim, -64, 63,
              "dim to split inputs and gather outputs along (default 0; may be negative)");
  add_text(app, "--output-device", "DEV", flags.output_device,
           "where outputs are gathered (default: the first device)");
  add_texts(app, "--split", "NAME=DIM|none", flags.splits,
            "split input NAME along DIM, or give it whole to every device; repeatable");
  add_text(app, "--split-policy", "P", flags.split_policy,
           "chunk (torch.chunk sizes, default) | even | weighted");
  add_text(app, "--weights", "W0,W1,...", flags.weights,
           "device weights for --split-policy weighted (default: measured)");
  add_integer(app, "--threads", "N", flags.threads, 1, 1024,
              "intra-op threads per device (default: the device's core share)");
  add_flag(app, "--allow-tf32", flags.allow_tf32,
           "float32 MatMul, Gemm and convolutions on GPUs may use TF32 tensor cores (about 1e-3 "
           "relative error; no effect on CPU devices)");
  add_flag(app, "--allow-winograd", flags.allow_winograd,
           "float32 3x3 stride-1 convolutions on CPUs may use oneDNN's Winograd algorithm "
           "(AVX-512 CPUs; larger rounding error; no effect on GPUs)");
}

void add_input_options(CLI::App& app, InputFlags& flags) {
  add_texts(app, "--input", "NAME=FILE", flags.files,
            "input from a .npy file (numbers, bool, '|S'/'<U' strings; a 2-byte '<u2'/'V2' file "
            "for a bfloat16 input) or an ONNX TensorProto .pb; repeatable. Inputs without a file "
            "are generated: floats in [-1, 1), integers in [0, 10) or below the size of the "
            "table they index");
  add_integer(app, "--batch", "N", flags.batch, 1, 1 << 30,
              "size of symbolic leading dims of generated inputs (default 1)");
  add_texts(app, "--symbol", "NAME=N", flags.symbols,
            "size of another symbolic dim of generated inputs; repeatable");
  add_transform_options(app, flags.transforms, false);
}

CLI::Option* add_precision_option(CLI::App& app, std::optional<std::string>& field,
                                  const std::string& help) {
  return add_text(app, "--precision", "P", field, help);
}

ModelOptions model_options(const DeviceFlags& flags, const std::optional<std::string>& precision) {
  ModelOptions options;
  options.plan.allow_tf32 = flags.allow_tf32;
  options.plan.allow_winograd = flags.allow_winograd;
  if (auto dtype = precision_of(precision)) options.precision = *dtype;
  return options;
}

std::optional<DType> precision_of(const std::optional<std::string>& precision) {
  if (!precision) return std::nullopt;
  if (*precision != "float32" && *precision != "float16" && *precision != "bfloat16")
    throw UsageError("--precision: '" + *precision + "' is not float32, float16 or bfloat16");
  return dtype_from_name(*precision);
}

DataParallelOptions parallel_options(const DeviceFlags& flags) {
  DataParallelOptions options;
  try {
    options.device_ids = parse_device_list(flags.devices.value_or("all"));
  } catch (const UsageError&) {
    throw;
  } catch (const Error& e) {
    throw UsageError(std::string("--devices: ") + e.what() +
                     device_hint(flags.devices.value_or("")));
  }
  options.dim = flags.dim.value_or(0);
  if (const auto& out = flags.output_device) {
    try {
      options.output_device = Device::parse(*out);
    } catch (const Error& e) {
      throw UsageError(std::string("--output-device: ") + e.what() + device_hint(*out));
    }
  }
  for (const auto& spec : flags.splits) {
    auto [name, value] = split_assignment(spec, "split");
    if (options.input_splits.count(name)) throw UsageError("--split '" + name + "' given twice");
    options.input_splits[name] = value == "none"
                                     ? InputSplit::whole()
                                     : InputSplit::along(parse_int(value, "--split " + name));
  }
  if (const auto& policy = flags.split_policy) {
    try {
      options.split_policy = parse_split_policy(*policy);
    } catch (const Error& e) {
      throw UsageError(std::string("--split-policy: ") + e.what());
    }
  }
  if (const auto& weights = flags.weights) {
    if (options.split_policy != SplitPolicy::Weighted)
      throw UsageError("--weights needs --split-policy weighted");
    std::stringstream ss(*weights);
    for (std::string item; std::getline(ss, item, ',');) {
      char* end = nullptr;
      double w = std::strtod(item.c_str(), &end);
      if (item.empty() || *end != '\0' || !(w > 0))
        throw UsageError("--weights must be positive numbers, got '" + item + "'");
      options.weights.push_back(w);
    }
    if (options.weights.size() != options.device_ids.size())
      throw UsageError("--weights has " + std::to_string(options.weights.size()) + " values for " +
                       std::to_string(options.device_ids.size()) + " devices");
  }
  options.threads = static_cast<int>(flags.threads.value_or(0));
  check_devices_have_backends(options);
  return options;
}

InputOptions input_options(const InputFlags& flags) {
  InputOptions options;
  options.batch = flags.batch.value_or(1);
  for (const auto& spec : flags.symbols) {
    auto [name, value] = split_assignment(spec, "symbol");
    int64_t n = parse_int(value, "--symbol " + name);
    if (n < 1) throw UsageError("--symbol " + name + " must be positive");
    options.dims[name] = n;
  }
  for (const auto& spec : flags.files) {
    auto [name, path] = split_assignment(spec, "input");
    if (options.files.count(name)) throw UsageError("--input '" + name + "' given twice");
    options.files[name] = path;
  }
  options.transforms = input_transforms(flags.transforms);
  return options;
}

}  // namespace dprun::cli
