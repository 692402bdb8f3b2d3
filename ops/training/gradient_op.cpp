// Gradient (ai.onnx.preview.training, opset 1): dy/dx for each x in `xs`, with dY = ones.
// At construction the kernel cuts from the enclosing graph the forward nodes that y depends
// on (with xs and zs as its inputs), appends the backward nodes from the gradient builder and
// compiles that sub-graph; compute runs it on the node's inputs (the values of xs then zs).
#include <set>
#include <unordered_map>

#include "engine/autograd/gradient_builder.h"
#include "engine/executor.h"
#include "engine/kernel.h"

namespace dprun {
namespace {

class GradientKernel : public OpKernel {
 public:
  explicit GradientKernel(const KernelInfo& info) {
    const Node& node = info.node;
    if (info.graph == nullptr) node.fail("needs the graph that holds it");
    const Graph& outer = *info.graph;
    std::vector<std::string> xs = node.attr_strings("xs");
    std::vector<std::string> zs = node.attr_strings("zs");
    std::string y = node.attr_string("y");
    if (xs.empty()) node.fail("attribute 'xs' is empty");
    if (node.inputs.size() != xs.size() + zs.size())
      node.fail("expects ", xs.size() + zs.size(), " inputs (xs then zs), got ",
                node.inputs.size());
    if (node.outputs.size() != xs.size())
      node.fail("expects one output per x (", xs.size(), "), got ", node.outputs.size());

    auto sub = std::make_shared<Graph>();
    sub->name = outer.name + "/" + node.name + "/gradient";
    sub->opset_imports = outer.opset_imports;
    sub->value_types = outer.value_types;
    sub->ir_version = outer.ir_version;

    std::set<std::string> leaves;
    std::vector<std::string> leaf_names = xs;
    leaf_names.insert(leaf_names.end(), zs.begin(), zs.end());
    for (size_t i = 0; i < leaf_names.size(); ++i) {
      const std::string& name = leaf_names[i];
      if (!leaves.insert(name).second) node.fail("'", name, "' appears twice in xs and zs");
      TensorType type;
      if (auto t = outer.type_of(name))
        type = *t;
      else if (i < info.input_types.size() && info.input_types[i])
        type = *info.input_types[i];
      sub->inputs.push_back({name, type});
    }

    // The forward nodes y depends on, stopping at xs and zs.
    std::unordered_map<std::string, size_t> producer;
    for (size_t n = 0; n < outer.nodes.size(); ++n)
      for (const auto& out : outer.nodes[n].outputs)
        if (!out.empty()) producer[out] = n;
    std::set<std::string> outer_inputs;
    for (const auto& in : outer.inputs) outer_inputs.insert(in.name);
    std::vector<bool> needed(outer.nodes.size(), false);
    std::set<std::string> seen;
    std::vector<std::string> stack{y};
    while (!stack.empty()) {
      std::string v = stack.back();
      stack.pop_back();
      if (v.empty() || leaves.count(v) || !seen.insert(v).second) continue;
      if (auto p = producer.find(v); p != producer.end()) {
        const Node& prod = outer.nodes[p->second];
        if (&prod == &node) node.fail("y '", y, "' depends on this Gradient node's own outputs");
        needed[p->second] = true;
        for (const auto& in : prod.inputs) stack.push_back(in);
      } else if (auto it = outer.initializers.find(v); it != outer.initializers.end()) {
        sub->initializers.emplace(v, it->second);
      } else if (outer_inputs.count(v)) {
        node.fail("y '", y, "' depends on graph input '", v, "', which is neither in xs nor zs");
      } else {
        node.fail("y '", y, "' depends on '", v, "', which nothing in the graph produces");
      }
    }
    for (size_t n = 0; n < outer.nodes.size(); ++n)
      if (needed[n]) sub->nodes.push_back(outer.nodes[n]);

    GradientSpec spec;
    spec.xs = xs;
    spec.y = y;
    spec.prefix = node.name + "/grad/";
    GradientResult grads = build_gradient(*sub, spec);
    for (auto& n : grads.nodes) sub->nodes.push_back(std::move(n));
    for (size_t i = 0; i < xs.size(); ++i) {
      TensorType type;
      if (auto t = outer.type_of(xs[i])) type.dtype = t->dtype;
      sub->outputs.push_back({grads.gradients[i], type});
    }
    plan_ = Plan::build(sub, info.device_type, {}, info.plan_options);
    for (int id : plan_->parameter_ids())
      parameters_.push_back(sub->initializers.at(plan_->value_name(id)));
  }

  void compute(KernelContext& ctx) const override {
    std::vector<Tensor> feeds;
    for (size_t i = 0; i < ctx.input_count(); ++i) feeds.push_back(ctx.input(i));
    std::vector<Tensor> params;
    for (const auto& p : parameters_) params.push_back(p.to(ctx.device()));
    RunOptions run;
    run.context = &ctx.execution();
    std::vector<Tensor> results = execute_plan(*plan_, ctx.device(), params, feeds, {}, run);
    for (size_t i = 0; i < results.size(); ++i) ctx.set_output(i, results[i]);
  }

 private:
  std::shared_ptr<const Plan> plan_;
  std::vector<Tensor> parameters_;
};

DPRUN_REGISTER_KERNEL({.domain = "ai.onnx.preview.training",
                       .op_type = "Gradient",
                       .since = 1,
                       .factory = make_kernel<GradientKernel>});

}  // namespace
}  // namespace dprun
