#include "engine/model.h"

#include <set>

#include "engine/backend.h"
#include "engine/env_flag.h"
#include "engine/rewrites/device_rewrites.h"
#include "engine/rewrites/half_precision.h"

namespace dprun {

namespace {
/// The rewrites `options` allow, less those the environment turns off.
GraphRewriteOptions rewrites_allowed(const ModelOptions& options) {
  return {.layout = options.channels_last && !env_flag("DPRUN_NO_LAYOUT_REWRITE"),
          .fusion = options.fuse_ops && !env_flag("DPRUN_NO_FUSION")};
}

/// `graph` compiled for `device`: whatever its backend makes of the graph
/// (rewrite_for_device). Checks first that the device can be used, so that is the error a
/// bad device gives.
std::shared_ptr<const Plan> compile(const std::shared_ptr<const Graph>& graph, Device device,
                                    const GraphRewriteOptions& rewrite,
                                    const PlanOptions& options) {
  Backend& backend = backend_for(device);
  backend.check_device(device);
  return Plan::build(rewrite_for_device(backend, graph, rewrite), device.type, {}, options);
}
/// `graph` in the precision the options ask for.
std::shared_ptr<const Graph> in_precision(std::shared_ptr<const Graph> graph,
                                          const ModelOptions& options) {
  if (options.precision == DType::Float32) return graph;
  return to_half_precision(*graph, {.dtype = options.precision});
}
}  // namespace

Model::Model(std::shared_ptr<const Graph> graph, Device device, ModelOptions options)
    : graph_(in_precision(std::move(graph), options)),
      rewrite_(rewrites_allowed(options)),
      plan_(compile(graph_, device, rewrite_, options.plan)),
      device_(device),
      version_(std::make_shared<std::atomic<uint64_t>>(next_parameters_version())) {
  // The rewrite keeps the initializers as they are, so the plan's parameters are the graph's.
  for (int id : plan_->parameter_ids())
    parameters_.push_back(graph_->initializers.at(plan_->value_name(id)).to_unless_string(device));
}

Model::Model(std::shared_ptr<const Plan> plan, Device device, std::vector<Tensor> parameters,
             std::shared_ptr<std::atomic<uint64_t>> version, std::shared_ptr<const Graph> graph,
             GraphRewriteOptions rewrite)
    : graph_(graph ? std::move(graph) : plan->graph_ptr()),
      rewrite_(rewrite),
      plan_(std::move(plan)),
      device_(device),
      parameters_(std::move(parameters)),
      version_(version ? std::move(version)
                       : std::make_shared<std::atomic<uint64_t>>(next_parameters_version())) {
  DPRUN_CHECK(device.type == plan_->device_type(), "a plan for ",
              device_type_name(plan_->device_type()), " cannot run on ", device.to_string());
  DPRUN_CHECK(parameters_.size() == plan_->parameter_ids().size(), "expected ",
              plan_->parameter_ids().size(), " parameters, got ", parameters_.size());
}

std::shared_ptr<const Plan> Model::plan_for(Device device) const {
  if (device.type == device_.type) return plan_;
  return compile(graph_, device, rewrite_, plan_->options());
}

uint64_t Model::next_parameters_version() {
  static std::atomic<uint64_t> last{0};
  return ++last;
}

namespace {
RunOptions with_version(const RunOptions& options, uint64_t version) {
  RunOptions o = options;
  o.parameters_version = version;
  return o;
}
}  // namespace

std::vector<Tensor> Model::run(const std::vector<Tensor>& inputs, const RunOptions& options) const {
  const RunOptions versioned = with_version(options, parameters_version());
  auto outputs = PlanGraphs::enabled_for(device_)
                     ? graphs_->run(*plan_, device_, parameters_, inputs, versioned)
                     : execute_plan(*plan_, device_, parameters_, inputs, {}, versioned);
  if (!graph().state_updates.empty()) mark_parameters_changed();
  return outputs;
}

std::vector<Tensor> Model::run(const std::map<std::string, Tensor>& inputs,
                               const RunOptions& options) const {
  std::vector<Tensor> feeds;
  std::map<std::string, Tensor> overrides;
  std::set<std::string> used;
  for (const ValueInfo* in : graph().required_inputs()) {
    auto it = inputs.find(in->name);
    DPRUN_CHECK(it != inputs.end(), "input '", in->name, "' is missing");
    feeds.push_back(it->second);
    used.insert(in->name);
  }
  for (const auto& [name, tensor] : inputs) {
    if (used.count(name)) continue;
    DPRUN_CHECK(graph().initializers.count(name), "the model has no input named '", name, "'");
    overrides.emplace(name, tensor);
  }
  if (overrides.empty()) return run(feeds, options);
  auto outputs = execute_plan(*plan_, device_, parameters_, feeds, overrides,
                              with_version(options, parameters_version()));
  if (!graph().state_updates.empty()) mark_parameters_changed();
  return outputs;
}

std::vector<std::string> Model::input_names() const {
  std::vector<std::string> names;
  for (const ValueInfo* in : graph().required_inputs()) names.push_back(in->name);
  return names;
}

std::vector<TensorType> Model::input_types() const {
  std::vector<TensorType> types;
  for (const ValueInfo* in : graph().required_inputs()) types.push_back(in->type);
  return types;
}

std::vector<std::string> Model::output_names() const {
  std::vector<std::string> names;
  for (const auto& out : graph().outputs) names.push_back(out.name);
  return names;
}

std::vector<std::string> Model::parameter_names() const {
  std::vector<std::string> names;
  for (int id : plan_->parameter_ids()) names.push_back(plan_->value_name(id));
  return names;
}

Tensor Model::parameter(const std::string& name) const {
  const auto& ids = plan_->parameter_ids();
  for (size_t i = 0; i < ids.size(); ++i)
    if (plan_->value_name(ids[i]) == name) return parameters_[i];
  fail("the model has no parameter named '", name, "'");
}

void Model::set_parameter(const std::string& name, const Tensor& value) {
  Tensor target = parameter(name);
  DPRUN_CHECK(target.dtype() == value.dtype() && target.shape() == value.shape(), "parameter '",
              name, "' is ", target.describe(), ", cannot set it from ", value.describe());
  target.copy_from(value);
  mark_parameters_changed();
}

std::shared_ptr<Model> share_parameters(const Model& base, std::shared_ptr<const Graph> graph,
                                        ModelOptions options) {
  Model compiled(std::move(graph), base.device(), options);
  std::vector<Tensor> shared;
  for (const auto& name : compiled.parameter_names()) shared.push_back(base.parameter(name));
  return std::make_shared<Model>(compiled.plan(), base.device(), std::move(shared),
                                 base.shared_version(), compiled.graph_ptr(),
                                 compiled.rewrite_options());
}

}  // namespace dprun
