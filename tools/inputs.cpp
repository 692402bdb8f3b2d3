#include "tools/inputs.h"

#include <algorithm>
#include <cstring>
#include <random>
#include <set>

#include "engine/op_facts.h"
#include "engine/training/sample_transform.h"
#include "loader/npy.h"
#include "loader/onnx_loader.h"
#include "tools/transform_flags.h"
#include "tools/typo_hints.h"
#include "tools/usage_error.h"

namespace dprun::cli {

namespace {

// Integers are drawn from [0, int_limit), int_limit at most 10 (as [0, 10) always was).
Tensor random_tensor(const Shape& shape, DType dtype, uint32_t seed, int64_t int_limit) {
  std::mt19937 rng(seed);
  Tensor t = Tensor::empty(shape, dtype);
  std::uniform_real_distribution<double> real(-1.0, 1.0);
  std::uniform_int_distribution<int> small(0, 9);
  std::uniform_int_distribution<int> below(0, static_cast<int>(int_limit) - 1);
  visit_dtype(dtype, [&](auto zero) {
    using T = decltype(zero);
    T* p = t.data<T>();
    for (int64_t i = 0; i < t.numel(); ++i) {
      if constexpr (std::is_same_v<T, bool>)
        p[i] = small(rng) % 2 == 0;
      else if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>)
        p[i] = T(static_cast<float>(real(rng)));
      else if constexpr (std::is_floating_point_v<T>)
        p[i] = static_cast<T>(real(rng));
      else
        p[i] = static_cast<T>(below(rng));
    }
  });
  return t;
}

// The shape of `value` where the graph knows it: an initializer, a Constant's, a declared type.
std::optional<std::vector<std::optional<int64_t>>> known_dims(const Graph& graph,
                                                              const std::string& value) {
  auto as_dims = [](const Shape& shape) {
    return std::vector<std::optional<int64_t>>(shape.begin(), shape.end());
  };
  if (auto init = graph.initializers.find(value); init != graph.initializers.end())
    return as_dims(init->second.shape());
  for (const Node& n : graph.nodes)
    if (n.op_type == "Constant" && n.outputs.size() == 1 && n.outputs[0] == value &&
        n.has_attr("value"))
      return as_dims(n.attr_tensor("value").shape());
  auto type = graph.value_types.find(value);
  if (type == graph.value_types.end() || !type->second.shape) return std::nullopt;
  std::vector<std::optional<int64_t>> dims;
  for (const Dim& d : *type->second.shape)
    dims.push_back(d.is_known() ? std::optional<int64_t>(d.value) : std::nullopt);
  return dims;
}

// The size of the dim a Gather node gathers along, where known.
std::optional<int64_t> gathered_dim(const Graph& graph, const Node& gather) {
  const auto dims = known_dims(graph, gather.inputs[0]);
  if (!dims || dims->empty()) return std::nullopt;
  int64_t axis = gather.attr_int("axis", 0);
  if (axis < 0) axis += static_cast<int64_t>(dims->size());
  if (axis < 0 || axis >= static_cast<int64_t>(dims->size())) return std::nullopt;
  return (*dims)[static_cast<size_t>(axis)];
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

Tensor as_declared(const Tensor& t, DType declared) {
  if (declared != DType::BFloat16 || t.dtype() != DType::UInt16) return t;
  Tensor out = Tensor::empty(t.shape(), DType::BFloat16);
  std::memcpy(out.raw_data(), t.raw_data(), t.nbytes());
  return out;
}

Shape concrete_shape(const TensorType& type, const InputOptions& options) {
  Shape shape;
  if (!type.shape) return shape;
  for (size_t d = 0; d < type.shape->size(); ++d) {
    const Dim& dim = (*type.shape)[d];
    if (dim.is_known()) {
      shape.push_back(dim.value);
    } else if (auto it = options.dims.find(dim.symbol);
               !dim.symbol.empty() && it != options.dims.end()) {
      shape.push_back(it->second);
    } else {
      shape.push_back(d == 0 ? options.batch : 1);
    }
  }
  return shape;
}

std::map<std::string, std::string> apply_initializer_overrides(
    Model& model, const std::map<std::string, std::string>& files) {
  std::map<std::string, std::string> rest;
  const Graph& graph = model.graph();
  for (const auto& [name, path] : files) {
    const bool listed = std::any_of(graph.inputs.begin(), graph.inputs.end(),
                                    [&](const ValueInfo& in) { return in.name == name; });
    auto init = graph.initializers.find(name);
    if (!listed || init == graph.initializers.end()) {
      rest.emplace(name, path);
      continue;
    }
    Tensor t = as_declared(ends_with(path, ".pb") ? read_tensor_proto_file(path) : read_npy(path),
                           init->second.dtype());
    if (t.dtype() != init->second.dtype() || t.shape() != init->second.shape())
      throw UsageError("--input '" + name + "' overrides an initializer of " +
                       std::string(dtype_name(init->second.dtype())) +
                       shape_to_string(init->second.shape()) + ", but " + path + " holds " +
                       std::string(dtype_name(t.dtype())) + shape_to_string(t.shape()));
    model.set_parameter(name, t);
  }
  return rest;
}

void check_input_names(const std::map<std::string, std::string>& files,
                       const std::vector<std::string>& input_names) {
  for (const auto& [name, path] : files) {
    if (std::find(input_names.begin(), input_names.end(), name) != input_names.end()) continue;
    std::string listed;
    for (const std::string& n : input_names) {
      if (!listed.empty()) listed += ", ";
      listed += n;
    }
    const auto close = nearest(name, input_names);
    throw UsageError("--input names '" + name + "', which is not an input of the model (" +
                     (close ? "did you mean '" + *close + "'? " : "") + "its inputs: " + listed +
                     ")");
  }
}

std::optional<int64_t> index_bound(const Graph& graph, const std::string& name) {
  std::set<std::string> carriers = {name};  // values holding the input's values
  std::optional<int64_t> bound;
  for (const Node& n : graph.nodes) {  // topological order: carriers grow forwards
    if (n.op_type == "Gather" && n.inputs.size() == 2 && carriers.count(n.inputs[1]))
      if (auto rows = gathered_dim(graph, n); rows && *rows > 0)
        bound = std::min(bound.value_or(*rows), *rows);
    if (op_facts(n).keeps_values && !n.inputs.empty() && carriers.count(n.inputs[0]))
      carriers.insert(n.outputs.begin(), n.outputs.end());
  }
  return bound;
}

std::vector<std::string> generated_input_names(const Model& model, const InputOptions& options) {
  std::vector<std::string> generated;
  for (const std::string& name : model.input_names())
    if (!options.files.count(name)) generated.push_back(name);
  return generated;
}

bool batch_sizes_an_input(const Model& model, const InputOptions& options) {
  const auto names = model.input_names();
  const auto types = model.input_types();
  for (size_t i = 0; i < names.size(); ++i) {
    if (options.files.count(names[i]) || !types[i].shape || types[i].shape->empty()) continue;
    const Dim& first = types[i].shape->front();
    if (!first.is_known() && (first.symbol.empty() || !options.dims.count(first.symbol)))
      return true;
  }
  return false;
}

void rethrow_noting_generated(const std::exception& error,
                              const std::vector<std::string>& generated) {
  if (generated.empty()) throw;
  std::string names;
  for (const std::string& n : generated) {
    if (!names.empty()) names += ", ";
    names += n;
  }
  throw Error(std::string(error.what()) + " (on generated input" +
              (generated.size() == 1 ? " " : "s ") + names +
              ": give real data with --input NAME=FILE.npy)");
}

std::vector<Tensor> prepare_inputs(Model& model, const InputOptions& given) {
  InputOptions options = given;
  options.files = apply_initializer_overrides(model, given.files);
  auto names = model.input_names();
  auto types = model.input_types();
  check_input_names(options.files, names);
  check_transforms_fit(model, options.transforms);
  for (const auto& [name, transform] : options.transforms)
    if (!options.files.count(name))
      throw UsageError("--" + std::string(transform.mean.empty() ? "layout" : "normalize") + " " +
                       name + ": input '" + name + "' has no --input file to transform");
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < names.size(); ++i) {
    auto file = options.files.find(names[i]);
    if (file == options.files.end()) {
      DPRUN_CHECK(is_storable(types[i].dtype), "input '", names[i], "' has dtype ",
                  dtype_name(types[i].dtype), ", which cannot be generated");
      // Indices stay inside the table they index, so an ordinary model runs on them.
      const int64_t limit =
          std::min<int64_t>(10, index_bound(model.graph(), names[i]).value_or(10));
      inputs.push_back(random_tensor(concrete_shape(types[i], options), types[i].dtype,
                                     static_cast<uint32_t>(1234 + i), limit));
      continue;
    }
    Tensor t = as_declared(ends_with(file->second, ".pb") ? read_tensor_proto_file(file->second)
                                                          : read_npy(file->second),
                           types[i].dtype);
    if (auto transform = options.transforms.find(names[i]); transform != options.transforms.end())
      t = transform_all_rows(names[i], transform->second, t);
    check_input({names[i], types[i]}, t);
    inputs.push_back(t);
  }
  return inputs;
}

std::vector<Tensor> pin_for_devices(std::vector<Tensor> inputs,
                                    const std::vector<Device>& devices) {
  for (const Device& device : devices) {
    if (device.type == DeviceType::CPU) continue;
    try {
      for (Tensor& t : inputs) t = t.pin_memory(device);
    } catch (const Error&) {
      // No page-locked memory to be had: the inputs stay pageable, and copies run slower.
    }
    break;
  }
  return inputs;
}

}  // namespace dprun::cli
