#pragma once
// The bundled models (models/*.onnx) for in-process tests: their paths and deterministic
// inputs of any batch size.
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "engine/model.h"

namespace dprun::testing {

/// models/NAME.onnx in the source tree (DPRUN_SOURCE_DIR when set, else the configured one).
inline std::string bundled_model_path(const std::string& name) {
  const char* root = std::getenv("DPRUN_SOURCE_DIR");
  return std::string(root ? root : DPRUN_SOURCE_DIR_DEFAULT) + "/models/" + name + ".onnx";
}

/// Every bundled model (models/*.onnx) by name, for tests that loop over them all.
inline std::map<std::string, std::string> bundled_model_paths() {
  const char* root = std::getenv("DPRUN_SOURCE_DIR");
  const std::filesystem::path dir =
      std::filesystem::path(root ? root : DPRUN_SOURCE_DIR_DEFAULT) / "models";
  std::map<std::string, std::string> paths;
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    if (entry.path().extension() == ".onnx")
      paths[entry.path().stem().string()] = entry.path().string();
  return paths;
}

/// Deterministic inputs for the model's declared inputs: the first unknown dim is `batch`,
/// later ones 12 (a sequence length); float32 and float16 values in [-1, 1], int64 ids below
/// 1000.
inline std::vector<Tensor> deterministic_inputs(const Model& model, int64_t batch) {
  std::vector<Tensor> inputs;
  for (const TensorType& type : model.input_types()) {
    Shape shape;
    for (const Dim& d : *type.shape)
      shape.push_back(d.is_known() ? d.value : shape.empty() ? batch : 12);
    Tensor t = Tensor::zeros(shape, type.dtype);
    for (int64_t i = 0; i < t.numel(); ++i) {
      const float v = static_cast<float>((i * 37) % 101) / 50.0f - 1.0f;
      if (type.dtype == DType::Float32) t.data<float>()[i] = v;
      if (type.dtype == DType::Float16) t.data<Float16>()[i] = Float16(v);
      if (type.dtype == DType::Int64) t.data<int64_t>()[i] = (i * 13) % 1000;
    }
    inputs.push_back(t);
  }
  return inputs;
}

}  // namespace dprun::testing
