#include "tools/inputs.h"

#include <algorithm>
#include <cstring>
#include <random>

#include "loader/npy.h"
#include "loader/onnx_loader.h"
#include "tools/cli_args.h"

namespace dprun::cli {

namespace {

Tensor random_tensor(const Shape& shape, DType dtype, uint32_t seed) {
  std::mt19937 rng(seed);
  Tensor t = Tensor::empty(shape, dtype);
  std::uniform_real_distribution<double> real(-1.0, 1.0);
  std::uniform_int_distribution<int> small(0, 9);
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
        p[i] = static_cast<T>(small(rng));
    }
  });
  return t;
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

std::vector<Tensor> prepare_inputs(Model& model, const InputOptions& given) {
  InputOptions options = given;
  options.files = apply_initializer_overrides(model, given.files);
  auto names = model.input_names();
  auto types = model.input_types();
  for (const auto& [name, path] : options.files) {
    bool known = std::find(names.begin(), names.end(), name) != names.end();
    if (!known)
      throw UsageError("--input names '" + name + "', which is not an input of the model");
  }
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < names.size(); ++i) {
    auto file = options.files.find(names[i]);
    if (file == options.files.end()) {
      DPRUN_CHECK(is_storable(types[i].dtype), "input '", names[i], "' has dtype ",
                  dtype_name(types[i].dtype), ", which cannot be generated");
      inputs.push_back(random_tensor(concrete_shape(types[i], options), types[i].dtype,
                                     static_cast<uint32_t>(1234 + i)));
      continue;
    }
    Tensor t = as_declared(ends_with(file->second, ".pb") ? read_tensor_proto_file(file->second)
                                                          : read_npy(file->second),
                           types[i].dtype);
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
