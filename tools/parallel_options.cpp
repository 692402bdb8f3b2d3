#include "tools/parallel_options.h"

#include <sstream>

#include "engine/backend.h"
#include "engine/parallel/device_list.h"

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

std::vector<OptionSpec> parallel_option_specs() {
  return {{"devices"},
          {"dim"},
          {"output-device"},
          {"split", true, true},
          {"split-policy"},
          {"weights"},
          {"threads"},
          {"input", true, true},
          {"batch"},
          {"symbol", true, true},
          {"allow-tf32", false},
          {"allow-winograd", false}};
}

ModelOptions parse_model_options(const Args& args) {
  ModelOptions options;
  options.plan.allow_tf32 = args.has("allow-tf32");
  options.plan.allow_winograd = args.has("allow-winograd");
  if (auto precision = parse_precision(args)) options.precision = *precision;
  return options;
}

std::optional<DType> parse_precision(const Args& args) {
  auto precision = args.get("precision");
  if (!precision) return std::nullopt;
  if (*precision != "float32" && *precision != "float16" && *precision != "bfloat16")
    throw UsageError("--precision: '" + *precision + "' is not float32, float16 or bfloat16");
  return dtype_from_name(*precision);
}

DataParallelOptions parse_parallel_options(const Args& args) {
  DataParallelOptions options;
  try {
    options.device_ids = parse_device_list(args.get("devices").value_or("all"));
  } catch (const UsageError&) {
    throw;
  } catch (const Error& e) {
    throw UsageError(std::string("--devices: ") + e.what() +
                     device_hint(args.get("devices").value_or("")));
  }
  options.dim = args.get_int("dim", 0, -64, 63);
  if (auto out = args.get("output-device")) {
    try {
      options.output_device = Device::parse(*out);
    } catch (const Error& e) {
      throw UsageError(std::string("--output-device: ") + e.what() + device_hint(*out));
    }
  }
  for (const auto& spec : args.all("split")) {
    auto [name, value] = split_assignment(spec, "split");
    if (options.input_splits.count(name)) throw UsageError("--split '" + name + "' given twice");
    options.input_splits[name] = value == "none"
                                     ? InputSplit::whole()
                                     : InputSplit::along(parse_int(value, "--split " + name));
  }
  if (auto policy = args.get("split-policy")) {
    try {
      options.split_policy = parse_split_policy(*policy);
    } catch (const Error& e) {
      throw UsageError(std::string("--split-policy: ") + e.what());
    }
  }
  if (auto weights = args.get("weights")) {
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
  options.threads = static_cast<int>(args.get_int("threads", 0, 1, 1024));
  check_devices_have_backends(options);
  return options;
}

InputOptions parse_input_options(const Args& args) {
  InputOptions options;
  options.batch = args.get_int("batch", 1, 1, 1 << 30);
  for (const auto& spec : args.all("symbol")) {
    auto [name, value] = split_assignment(spec, "symbol");
    int64_t n = parse_int(value, "--symbol " + name);
    if (n < 1) throw UsageError("--symbol " + name + " must be positive");
    options.dims[name] = n;
  }
  for (const auto& spec : args.all("input")) {
    auto [name, path] = split_assignment(spec, "input");
    if (options.files.count(name)) throw UsageError("--input '" + name + "' given twice");
    options.files[name] = path;
  }
  return options;
}

}  // namespace dprun::cli
