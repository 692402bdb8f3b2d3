#include <algorithm>
#include <cmath>
#include <sstream>

#include "engine/rewrites/half_precision.h"
#include "loader/onnx_loader.h"
#include "tools/conformance.h"
#include "tools/inputs.h"

namespace dprun::cli {

namespace fs = std::filesystem;

namespace {

bool is_unsupported(const std::string& message) {
  return message.find("kernel") != std::string::npos ||
         message.find("not supported") != std::string::npos ||
         message.find("unsupported") != std::string::npos;
}

Status load_error_status(const Error& e) {
  return is_unsupported(e.what()) ? Status::Skipped : Status::Failed;
}

// Skipped when an input or output is not a tensor (a sequence, a map, an optional).
std::optional<Result> non_tensor_value(const Graph& graph, const std::string& id) {
  for (const auto& v : graph.inputs)
    if (v.type.dtype == DType::Undefined)
      return Result{id, Status::Skipped, "input '" + v.name + "' is not a tensor"};
  for (const auto& v : graph.outputs)
    if (v.type.dtype == DType::Undefined)
      return Result{id, Status::Skipped, "output '" + v.name + "' is not a tensor"};
  return std::nullopt;
}

// Runs one data set; empty when every output matches, else the reason it failed.
std::string run_data_set(const Graph& graph, const Model& model, const fs::path& set,
                         const Tolerance& tolerance) {
  auto input_files = numbered_files(set, "input_");
  auto output_files = numbered_files(set, "output_");
  if (input_files.size() > graph.inputs.size()) return "more input files than graph inputs";
  std::map<std::string, Tensor> feeds;
  for (size_t i = 0; i < input_files.size(); ++i)
    feeds[graph.inputs[i].name] =
        as_declared(read_tensor_proto_file(input_files[i].string()), graph.inputs[i].type.dtype);
  auto outputs = model.run(feeds);
  if (output_files.size() != outputs.size())
    return "expected " + std::to_string(output_files.size()) + " outputs";
  for (size_t o = 0; o < outputs.size(); ++o) {
    Tensor want =
        as_declared(read_tensor_proto_file(output_files[o].string()), graph.outputs[o].type.dtype);
    std::string diff = compare(outputs[o], want, graph.outputs[o].name, tolerance);
    if (!diff.empty()) return set.filename().string() + ": " + diff;
  }
  return {};
}

}  // namespace

std::vector<fs::path> data_sets(const fs::path& dir) {
  std::vector<fs::path> sets;
  for (const auto& entry : fs::directory_iterator(dir))
    if (entry.is_directory() && entry.path().filename().string().rfind("test_data_set_", 0) == 0)
      sets.push_back(entry.path());
  std::sort(sets.begin(), sets.end());
  return sets;
}

std::vector<fs::path> numbered_files(const fs::path& dir, const std::string& prefix) {
  std::vector<std::pair<int, fs::path>> files;
  for (const auto& entry : fs::directory_iterator(dir)) {
    std::string name = entry.path().filename().string();
    if (name.rfind(prefix, 0) != 0 || entry.path().extension() != ".pb") continue;
    files.emplace_back(std::stoi(name.substr(prefix.size())), entry.path());
  }
  std::sort(files.begin(), files.end());
  std::vector<fs::path> out;
  for (auto& [index, path] : files) out.push_back(path);
  return out;
}

Tolerance tolerance_for(DType precision) {
  switch (precision) {
    case DType::Float16:
      return {.rtol = 1e-2, .atol = 1e-7, .of_scale = 1e-2};
    case DType::BFloat16:
      return {.rtol = 5e-2, .atol = 1e-7, .of_scale = 5e-2};
    default:
      return {};
  }
}

std::string compare(const Tensor& got, const Tensor& want, const std::string& name,
                    const Tolerance& tolerance) {
  if (got.dtype() != want.dtype())
    return "output '" + name + "' has dtype " + std::string(dtype_name(got.dtype())) +
           ", expected " + std::string(dtype_name(want.dtype()));
  if (got.shape() != want.shape())
    return "output '" + name + "' has shape " + shape_to_string(got.shape()) + ", expected " +
           shape_to_string(want.shape());
  Tensor host = got.to(Device::cpu());
  if (want.dtype() == DType::String) {
    for (int64_t i = 0; i < want.numel(); ++i)
      if (host.data<std::string>()[i] != want.data<std::string>()[i])
        return "output '" + name + "' element " + std::to_string(i) + " is \"" +
               host.data<std::string>()[i] + "\", expected \"" + want.data<std::string>()[i] + "\"";
    return {};
  }
  bool exact = !is_floating(want.dtype());
  double scale = 0;
  if (!exact && tolerance.of_scale > 0)
    for (int64_t i = 0; i < want.numel(); ++i)
      if (std::isfinite(want.item_as_double(i)))
        scale = std::max(scale, std::fabs(want.item_as_double(i)));
  const double floor = tolerance.atol + tolerance.of_scale * scale;
  for (int64_t i = 0; i < want.numel(); ++i) {
    double a = host.item_as_double(i), b = want.item_as_double(i);
    if (std::isnan(a) && std::isnan(b)) continue;
    bool ok =
        exact ? a == b : (a == b || std::fabs(a - b) <= floor + tolerance.rtol * std::fabs(b));
    if (!ok) {
      std::ostringstream msg;
      msg << "output '" << name << "' element " << i << " is " << a << ", expected " << b;
      return msg.str();
    }
  }
  return {};
}

LoadedTest load_test(const fs::path& dir, const std::string& id, Device device, DType precision) {
  LoadedTest test;
  try {
    test.graph = load_graph((dir / "model.onnx").string());
  } catch (const Error& e) {
    test.stop = Result{id, load_error_status(e), e.what()};
    return test;
  }
  if (precision != DType::Float32) {
    try {
      test.graph = to_half_precision(*test.graph, {.dtype = precision});
    } catch (const Error& e) {
      test.stop = Result{id, Status::Skipped, e.what()};
      return test;
    }
  }
  test.stop = non_tensor_value(*test.graph, id);
  test.non_tensor = test.stop.has_value();
  if (test.non_tensor) return test;
  try {
    test.model = std::make_unique<Model>(test.graph, device);
  } catch (const Error& e) {
    test.stop = Result{id, load_error_status(e), e.what()};
  }
  return test;
}

Result run_test_in_process(const fs::path& dir, const std::string& id, Device device,
                           DType precision) {
  LoadedTest test = load_test(dir, id, device, precision);
  if (test.stop) return *test.stop;
  auto sets = data_sets(dir);
  if (sets.empty()) return {id, Status::Skipped, "no test_data_set_* folder"};
  try {
    for (const auto& set : sets) {
      std::string failure = run_data_set(*test.graph, *test.model, set, tolerance_for(precision));
      if (!failure.empty()) return {id, Status::Failed, failure};
    }
  } catch (const Error& e) {
    return {id, Status::Failed, e.what()};
  }
  return {id, Status::Passed, {}};
}

}  // namespace dprun::cli
