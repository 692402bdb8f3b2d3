#include "engine/training/preprocessing_graph.h"

#include <algorithm>
#include <optional>

#include "engine/training/image_ops.h"

namespace dprun {

namespace {

// Adds the nodes of one input's transform; returns the value the model's nodes now read.
class Chain {
 public:
  Chain(Graph& graph, std::string input) : graph_(graph), input_(input), last_(std::move(input)) {}

  // A node `op` named "preprocess.INPUT.STEP" reading the last value (and `constant`).
  void add(const std::string& step, const std::string& op, const std::optional<Tensor>& constant,
           std::map<std::string, Attribute> attributes = {}) {
    const std::string prefix = "preprocess." + input_ + "." + step;
    std::vector<std::string> inputs = {last_};
    if (constant) {
      graph_.initializers[prefix + ".constant"] = *constant;
      inputs.push_back(prefix + ".constant");
    }
    graph_.nodes.push_back({.name = prefix,
                            .op_type = op,
                            .inputs = std::move(inputs),
                            .outputs = {prefix + ".out"},
                            .attributes = std::move(attributes)});
    last_ = prefix + ".out";
  }
  const std::string& last() const { return last_; }

 private:
  Graph& graph_;
  std::string input_, last_;
};

// The per-channel constant of `values`, shaped to broadcast over an NHWC or NCHW batch.
Tensor per_channel(const std::vector<float>& values, bool channels_last) {
  const auto c = static_cast<int64_t>(values.size());
  return Tensor::from_vector<float>(channels_last ? Shape{c} : Shape{c, 1, 1}, values);
}

void rename_reads(Graph& graph, const std::string& from, const std::string& to, size_t first_new) {
  for (size_t n = 0; n < first_new; ++n)
    for (std::string& input : graph.nodes[n].inputs)
      if (input == from) input = to;
  for (ValueInfo& output : graph.outputs)
    DPRUN_CHECK(output.name != from, "--embed-preprocessing: input '", from,
                "' is also an output of the model");
}

}  // namespace

Graph with_embedded_preprocessing(const Graph& graph,
                                  const std::map<std::string, InputTransform>& transforms,
                                  const std::map<std::string, DType>& stored_dtypes) {
  Graph out = graph;
  std::vector<Node> front;
  for (const auto& [name, t] : transforms) {
    if (t.empty()) continue;
    auto input = std::find_if(out.inputs.begin(), out.inputs.end(),
                              [&](const ValueInfo& v) { return v.name == name; });
    DPRUN_CHECK(input != out.inputs.end() && !out.initializers.count(name),
                "--embed-preprocessing: '", name, "' is not an input of the model");
    for (const Augmentation& a : t.augment)
      DPRUN_CHECK(a.kind != AugmentKind::ResizedCrop, "--embed-preprocessing: input '", name,
                  "' is augmented with resized-crop, whose evaluation resize has no ONNX form "
                  "here; serve with dprun run --normalize and --layout");
    const DType stored = stored_dtypes.at(name);
    const size_t first_new = out.nodes.size();
    Chain chain(out, name);
    const Attribute to_float = Attribute::of_int(static_cast<int64_t>(DType::Float32));
    if (stored != DType::Float32) chain.add("to_float", "Cast", std::nullopt, {{"to", to_float}});
    if (is_integral(stored)) chain.add("scale", "Div", Tensor::scalar<float>(type_maximum(stored)));
    if (!t.mean.empty()) {
      chain.add("subtract_mean", "Sub", per_channel(t.mean, t.channels_last));
      chain.add("divide_std", "Div", per_channel(t.std, t.channels_last));
    }
    if (t.channels_last)
      chain.add("to_nchw", "Transpose", std::nullopt, {{"perm", Attribute::of_ints({0, 3, 1, 2})}});
    rename_reads(out, name, chain.last(), first_new);
    // The chain's nodes read the input, the model's nodes read the chain: they go first.
    front.insert(front.end(), out.nodes.begin() + static_cast<std::ptrdiff_t>(first_new),
                 out.nodes.end());
    out.nodes.resize(first_new);
    input->type.dtype = stored;
    if (t.channels_last && input->type.shape && input->type.shape->size() == 4) {
      const SymbolicShape& s = *input->type.shape;
      input->type.shape = SymbolicShape{s[0], s[2], s[3], s[1]};
    }
    out.value_types.erase(name);
  }
  out.nodes.insert(out.nodes.begin(), front.begin(), front.end());
  return out;
}

}  // namespace dprun
