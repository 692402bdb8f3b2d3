#pragma once
// Shared set-up for the benchmark programs: bundled models with random inputs, and one-node
// graphs for kernel benchmarks.
#include <memory>
#include <random>
#include <string>

#include "engine/model.h"
#include "loader/onnx_loader.h"

namespace dprun::bench {

inline std::string model_path(const std::string& name) {
  return std::string(DPRUN_SOURCE_DIR) + "/models/" + name + ".onnx";
}

inline Tensor random_floats(Shape shape, uint32_t seed = 1) {
  Tensor t = Tensor::empty(std::move(shape), DType::Float32);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1, 1);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = dist(rng);
  return t;
}

/// Inputs for a bundled model at `batch` (the transformer gets sequences of 128 tokens).
inline std::vector<Tensor> model_inputs(const Model& model, int64_t batch) {
  std::vector<Tensor> inputs;
  auto types = model.input_types();
  for (size_t i = 0; i < types.size(); ++i) {
    Shape shape;
    for (size_t d = 0; d < types[i].shape->size(); ++d) {
      const Dim& dim = (*types[i].shape)[d];
      shape.push_back(dim.is_known() ? dim.value : d == 0 ? batch : 128);
    }
    if (types[i].dtype == DType::Int64) {
      Tensor ids = Tensor::empty(shape, DType::Int64);
      for (int64_t k = 0; k < ids.numel(); ++k) ids.data<int64_t>()[k] = (k * 7919) % 1000;
      inputs.push_back(ids);
    } else if (model.input_names()[i] == "attention_mask") {
      Tensor mask = Tensor::empty(shape, DType::Float32);
      for (int64_t k = 0; k < mask.numel(); ++k) mask.data<float>()[k] = 1.0f;
      inputs.push_back(mask);
    } else {
      inputs.push_back(random_floats(shape, static_cast<uint32_t>(i + 1)));
    }
  }
  return inputs;
}

/// A model of one node `op` with inputs "x" (fed) and constant initializers.
inline std::shared_ptr<Model> single_node_model(
    const std::string& op, const Shape& x_shape,
    const std::vector<std::pair<std::string, Tensor>>& constants,
    std::map<std::string, Attribute> attributes = {}) {
  auto g = std::make_shared<Graph>();
  g->opset_imports[""] = 17;
  SymbolicShape shape;
  for (int64_t d : x_shape) shape.push_back(Dim::known(d));
  g->inputs.push_back({"x", {DType::Float32, shape}});
  Node n;
  n.name = op;
  n.op_type = op;
  n.inputs = {"x"};
  for (const auto& [name, t] : constants) {
    g->initializers[name] = t;
    n.inputs.push_back(name);
  }
  n.outputs = {"y"};
  n.attributes = std::move(attributes);
  g->nodes.push_back(n);
  g->outputs.push_back({"y", {DType::Float32, std::nullopt}});
  return std::make_shared<Model>(g, Device::cpu());
}

}  // namespace dprun::bench
