#include "engine/autograd/sync_batch_norm.h"

#include <map>
#include <set>
#include <string>
#include <vector>

#include "engine/autograd/inference_graph.h"
#include "engine/error.h"
#include "engine/rewrites/rewrite_domain.h"

namespace dprun {

namespace {

// Appends the nodes of one synchronized BatchNormalization, named after it.
class SyncBatchNormBuilder {
 public:
  SyncBatchNormBuilder(const Node& bn, DType dtype, int64_t opset, int64_t rank,
                       std::set<std::string>& names, std::map<std::string, TensorType>& types,
                       std::vector<Node>& out)
      : bn_(bn),
        dtype_(dtype),
        opset_(opset),
        rank_(rank),
        names_(names),
        types_(types),
        out_(out) {}

  void build() {
    const std::string &x = bn_.inputs[0], &scale = bn_.inputs[1], &bias = bn_.inputs[2];
    std::vector<int64_t> axes = {0}, stat_shape = {1, -1};
    for (int64_t a = 2; a < rank_; ++a) {
      axes.push_back(a);
      stat_shape.push_back(1);
    }
    // Elements per channel: Size(X) / Size(scale), summed over the replicas.
    const std::string size_x = node("Size", {x}), size_scale = node("Size", {scale});
    const std::string per_channel = node("Div", {size_x, size_scale});
    const std::string local =
        node("Cast", {per_channel}, {{"to", Attribute::of_int(static_cast<int64_t>(dtype_))}});
    const std::string n = all_reduce(local);
    // Typed scalars: the gradient builder sees the sizes are not differentiable, and a GPU
    // plan computes them on the host as shape arithmetic.
    for (const std::string& v : {size_x, size_scale, per_channel})
      types_[v] = TensorType{DType::Int64, SymbolicShape{}};
    for (const std::string& v : {local, n}) types_[v] = TensorType{dtype_, SymbolicShape{}};
    const std::string mean = node("Div", {all_reduce(reduce_sum(x, axes)), n});
    const std::string centered = node("Sub", {x, mean});
    const std::string var =
        node("Div", {all_reduce(reduce_sum(node("Mul", {centered, centered}), axes)), n});
    const std::string std_dev = node("Sqrt", {node("Add", {var, scalar(bn_epsilon())})});
    const std::string shape = ints(stat_shape);
    const std::string scaled =
        node("Mul", {node("Div", {centered, std_dev}), reshape(scale, shape)});
    node("Add", {scaled, reshape(bias, shape)}, {}, bn_.outputs[0]);

    const float momentum = bn_.attr_float("momentum", 0.9f);
    const std::string keep = scalar(momentum), take = scalar(1.0 - momentum);
    const std::string flat = ints({-1});
    if (wants_output(1))
      node("Add", {node("Mul", {bn_.inputs[3], keep}), node("Mul", {reshape(mean, flat), take})},
           {}, bn_.outputs[1]);
    if (wants_output(2)) {
      const std::string one = scalar(1.0);
      const std::string unbiased = node(
          "Mul", {reshape(var, flat), node("Div", {n, node("Max", {node("Sub", {n, one}), one})})});
      node("Add", {node("Mul", {bn_.inputs[4], keep}), node("Mul", {unbiased, take})}, {},
           bn_.outputs[2]);
    }
  }

 private:
  double bn_epsilon() const { return bn_.attr_float("epsilon", 1e-5f); }

  bool wants_output(size_t i) const { return bn_.outputs.size() > i && !bn_.outputs[i].empty(); }

  // A node of `op` (the rewrite domain's AllReduceSum, else ai.onnx) and its one output:
  // `output` when given, else a fresh name under the BatchNormalization's.
  std::string node(const std::string& op, std::vector<std::string> inputs,
                   std::map<std::string, Attribute> attrs = {}, std::string output = "") {
    Node n;
    n.op_type = op;
    if (op == "AllReduceSum") n.domain = kRewriteDomain;
    n.inputs = std::move(inputs);
    n.attributes = std::move(attrs);
    if (output.empty()) output = fresh(op);
    n.name = fresh("node/" + op);
    n.outputs = {output};
    out_.push_back(std::move(n));
    return output;
  }

  std::string all_reduce(const std::string& v) { return node("AllReduceSum", {v}); }

  std::string reduce_sum(const std::string& v, const std::vector<int64_t>& axes) {
    if (opset_ >= 13)
      return node("ReduceSum", {v, ints(axes)}, {{"keepdims", Attribute::of_int(1)}});
    return node("ReduceSum", {v},
                {{"axes", Attribute::of_ints(axes)}, {"keepdims", Attribute::of_int(1)}});
  }

  std::string reshape(const std::string& v, const std::string& shape) {
    return node("Reshape", {v, shape});
  }

  std::string scalar(double v) {
    Tensor t = dtype_ == DType::Float64 ? Tensor::scalar<double>(v)
                                        : Tensor::scalar<float>(static_cast<float>(v));
    return node("Constant", {}, {{"value", Attribute::of_tensor(t)}});
  }

  std::string ints(const std::vector<int64_t>& v) {
    return node("Constant", {},
                {{"value", Attribute::of_tensor(Tensor::from_vector<int64_t>(
                               {static_cast<int64_t>(v.size())}, v))}});
  }

  std::string fresh(const std::string& what) {
    const std::string base = (bn_.name.empty() ? bn_.outputs[0] : bn_.name) + "/sync/" + what;
    std::string name = base;
    for (int k = 1; names_.count(name); ++k) name = base + "_" + std::to_string(k);
    names_.insert(name);
    return name;
  }

  const Node& bn_;
  const DType dtype_;
  const int64_t opset_, rank_;
  std::set<std::string>& names_;
  std::map<std::string, TensorType>& types_;
  std::vector<Node>& out_;
};

std::set<std::string> value_and_node_names(const Graph& graph) {
  std::set<std::string> names;
  for (const auto& in : graph.inputs) names.insert(in.name);
  for (const auto& [name, t] : graph.initializers) names.insert(name);
  for (const auto& n : graph.nodes) {
    names.insert(n.name);
    names.insert(n.outputs.begin(), n.outputs.end());
  }
  return names;
}

}  // namespace

void synchronize_batch_norms(Graph& graph) {
  const int64_t opset = graph.opset("");
  std::set<std::string> names = value_and_node_names(graph);
  std::vector<Node> nodes;
  for (const Node& bn : graph.nodes) {
    if (bn.op_type != "BatchNormalization" || !canonical_domain(bn.domain).empty() ||
        bn.inputs.size() < 5 || !batch_norm_in_training_mode(bn, opset)) {
      nodes.push_back(bn);
      continue;
    }
    if (opset < 9)
      bn.fail("synchronized batch statistics need ai.onnx opset 9 or later, got ", opset);
    if (bn.outputs.size() > 3 &&
        (!bn.outputs[3].empty() || (bn.outputs.size() > 4 && !bn.outputs[4].empty())))
      bn.fail(
          "synchronized batch statistics do not make saved_mean and saved_var (outputs 3 and 4)");
    const auto x = graph.type_of(bn.inputs[0]);
    const auto scale = graph.type_of(bn.inputs[1]);
    if (!x || !x->shape || x->shape->size() < 2)
      bn.fail("synchronized batch statistics need X's rank");
    if (!scale || scale->dtype != x->dtype ||
        (x->dtype != DType::Float32 && x->dtype != DType::Float64))
      bn.fail("synchronized batch statistics need X and scale both float32 or both float64");
    SyncBatchNormBuilder(bn, x->dtype, opset, static_cast<int64_t>(x->shape->size()), names,
                         graph.value_types, nodes)
        .build();
  }
  graph.nodes = std::move(nodes);
  graph.opset_imports[kRewriteDomain] = 1;
}

}  // namespace dprun
