// Control flow: If, Loop and Scan. Each subgraph is compiled once into a nested Plan for the
// kernel's device type and run with execute_plan_values. Values the subgraph reads from
// enclosing scopes arrive as the node's implicit inputs (KernelInfo::implicit_inputs, after
// the declared inputs) and are fed to the nested plan after the subgraph's own inputs.
#include <algorithm>

#include "engine/executor.h"
#include "engine/op_facts.h"
#include "engine/plan.h"

namespace dprun {
namespace {

Value input_value(const KernelContext& ctx, size_t i) {
  return {ctx.has_input(i) ? ctx.input(i) : Tensor(), ctx.input_sequence_ptr(i)};
}

void set_output_value(KernelContext& ctx, size_t i, const Value& v) {
  if (v.is_sequence())
    ctx.set_output_sequence(i, v.sequence);
  else if (v.tensor.defined())
    ctx.set_output(i, v.tensor);
  else
    ctx.set_output_none(i);
}

bool read_bool(const KernelContext& ctx, const Tensor& t, const char* what) {
  if (t.numel() != 1) ctx.fail(what, " must hold one element, got ", t.describe());
  if (t.dtype() == DType::Bool) return t.to(Device::cpu()).data<bool>()[0];
  ctx.fail(what, " must be bool, got ", dtype_name(t.dtype()));
}

/// Stacks equally shaped tensors along a new dimension `axis` (in [0, rank]).
Tensor stack(const std::vector<Tensor>& parts, int64_t axis, Device device) {
  std::vector<Tensor> expanded;
  for (const Tensor& t : parts) {
    DPRUN_CHECK(t.shape() == parts.front().shape(), "cannot stack per-iteration outputs of shapes ",
                shape_to_string(parts.front().shape()), " and ", shape_to_string(t.shape()));
    Shape s = t.shape();
    s.insert(s.begin() + axis, 1);
    expanded.push_back(t.reshape(s));
  }
  return concat(expanded, axis, device);
}

/// A graph attribute compiled for the node's device type.
class Subgraph {
 public:
  Subgraph(const KernelInfo& info, const std::string& attr) {
    const Node& node = info.node;
    const Attribute* a = node.find_attr(attr);
    if (a == nullptr || a->kind != Attribute::Kind::Graph || !a->g)
      node.fail("missing graph attribute '", attr, "'");
    std::shared_ptr<const Graph> graph = a->g;
    if (graph->opset_imports.empty()) {  // hand-built subgraphs inherit the parent's opsets
      auto copy = std::make_shared<Graph>(*graph);
      if (info.graph) copy->opset_imports = info.graph->opset_imports;
      copy->opset_imports.emplace("", info.opset);
      graph = copy;
    }
    std::vector<std::string> outer = free_variables(*graph);
    for (const auto& name : outer) {
      auto it = std::find(info.implicit_inputs.begin(), info.implicit_inputs.end(), name);
      if (it == info.implicit_inputs.end())
        node.fail("subgraph '", attr, "' reads '", name, "', which is not an implicit input");
      outer_slots_.push_back(node.inputs.size() +
                             static_cast<size_t>(it - info.implicit_inputs.begin()));
    }
    try {
      plan_ = Plan::build(graph, info.device_type, outer, info.plan_options);
    } catch (const Error& e) {
      node.fail("subgraph '", attr, "': ", e.what());
    }
    for (int id : plan_->parameter_ids())
      parameters_.push_back(graph->initializers.at(plan_->value_name(id)));
    input_count_ = graph->required_inputs().size();
  }

  const Graph& graph() const { return plan_->graph(); }
  size_t input_count() const { return input_count_; }
  size_t output_count() const { return plan_->graph().outputs.size(); }

  /// Runs with the subgraph's own inputs; outer-scope values come from ctx.
  std::vector<Value> run(const KernelContext& ctx, std::vector<Value> inputs) const {
    DPRUN_CHECK(inputs.size() == input_count_, "subgraph '", graph().name, "' takes ", input_count_,
                " inputs, ", inputs.size(), " given");
    for (size_t slot : outer_slots_) inputs.push_back(input_value(ctx, slot));
    std::vector<Tensor> params;
    for (const Tensor& p : parameters_) params.push_back(p.to(ctx.device()));
    RunOptions run;
    run.context = &ctx.execution();  // the subgraph joins the node's thread team or stream
    return execute_plan_values(*plan_, ctx.device(), params, inputs, {}, run);
  }

  /// An empty stack of per-iteration output `index` (when a loop runs zero times), shaped
  /// [0, ...declared per-iteration shape] where that shape is known, else [0].
  Tensor empty_stack(size_t index, int64_t axis, Device device) const {
    const TensorType& type = graph().outputs[index].type;
    DType dtype = type.dtype == DType::Undefined ? DType::Float32 : type.dtype;
    Shape shape;
    if (type.shape) {
      for (const Dim& d : *type.shape) {
        if (!d.is_known()) {
          shape.clear();
          break;
        }
        shape.push_back(d.value);
      }
      if (static_cast<int64_t>(shape.size()) != static_cast<int64_t>(type.shape->size()))
        shape.clear();
    }
    axis = std::clamp<int64_t>(axis < 0 ? axis + static_cast<int64_t>(shape.size()) + 1 : axis, 0,
                               static_cast<int64_t>(shape.size()));
    shape.insert(shape.begin() + axis, 0);
    return Tensor::empty(shape, dtype, device);
  }

 private:
  std::shared_ptr<const Plan> plan_;
  std::vector<Tensor> parameters_;
  std::vector<size_t> outer_slots_;  // ctx input index of each outer-scope value
  size_t input_count_ = 0;
};

class IfKernel : public OpKernel {
 public:
  explicit IfKernel(const KernelInfo& info)
      : then_(info, "then_branch"), else_(info, "else_branch"), outputs_(info.node.outputs.size()) {
    for (const Subgraph* branch : {&then_, &else_}) {
      if (branch->output_count() != outputs_)
        info.node.fail("branch '", branch->graph().name, "' has ", branch->output_count(),
                       " outputs, the node has ", outputs_);
      if (branch->input_count() != 0)
        info.node.fail("branch '", branch->graph().name, "' must not take inputs");
    }
  }
  void compute(KernelContext& ctx) const override {
    bool cond = read_bool(ctx, ctx.input(0), "cond");
    std::vector<Value> results = (cond ? then_ : else_).run(ctx, {});
    for (size_t i = 0; i < outputs_; ++i) set_output_value(ctx, i, results[i]);
  }

 private:
  Subgraph then_, else_;
  size_t outputs_;
};

// Loop(M, cond, v_initial...): body(iter_num, cond, v...) -> (cond, v..., scan outputs...).
class LoopKernel : public OpKernel {
 public:
  explicit LoopKernel(const KernelInfo& info)
      : body_(info, "body"),
        carried_(info.node.inputs.size() < 2 ? 0 : info.node.inputs.size() - 2) {
    const Node& node = info.node;
    if (node.inputs.size() < 2) node.fail("needs the inputs M and cond (either may be empty)");
    if (body_.input_count() != carried_ + 2)
      node.fail("body takes ", body_.input_count(), " inputs, expected ", carried_ + 2,
                " (iteration number, condition and ", carried_, " loop-carried values)");
    if (body_.output_count() < carried_ + 1)
      node.fail("body has ", body_.output_count(), " outputs, expected at least ", carried_ + 1);
    scans_ = body_.output_count() - 1 - carried_;
    if (node.outputs.size() > carried_ + scans_)
      node.fail("has ", node.outputs.size(), " outputs, the body yields ", carried_ + scans_);
  }

  void compute(KernelContext& ctx) const override {
    const Tensor* max_trips = ctx.optional_input(0);
    int64_t trips = -1;
    if (max_trips) {
      if (max_trips->numel() != 1 || !is_integral(max_trips->dtype()))
        ctx.fail("M must be an integer scalar, got ", max_trips->describe());
      trips = static_cast<int64_t>(max_trips->to(Device::cpu()).item_as_double());
    }
    bool keep_going = true;
    if (const Tensor* cond = ctx.optional_input(1)) keep_going = read_bool(ctx, *cond, "cond");

    std::vector<Value> carried;
    for (size_t i = 0; i < carried_; ++i) carried.push_back(input_value(ctx, 2 + i));
    std::vector<std::vector<Tensor>> scanned(scans_);
    for (int64_t i = 0; (trips < 0 || i < trips) && keep_going; ++i) {
      std::vector<Value> feeds;
      feeds.push_back({Tensor::scalar<int64_t>(i).to(ctx.device()), nullptr});
      feeds.push_back({Tensor::scalar<bool>(keep_going).to(ctx.device()), nullptr});
      for (Value& v : carried) feeds.push_back(std::move(v));
      std::vector<Value> outs = body_.run(ctx, std::move(feeds));
      if (!outs[0].tensor.defined()) ctx.fail("body produced no condition");
      keep_going = read_bool(ctx, outs[0].tensor, "body condition output");
      for (size_t c = 0; c < carried_; ++c) carried[c] = std::move(outs[1 + c]);
      for (size_t k = 0; k < scans_; ++k) {
        const Value& v = outs[1 + carried_ + k];
        if (!v.tensor.defined()) ctx.fail("scan output ", k, " of the body is not a tensor");
        scanned[k].push_back(v.tensor);
      }
    }
    size_t outputs = ctx.output_count();
    for (size_t c = 0; c < carried_ && c < outputs; ++c) set_output_value(ctx, c, carried[c]);
    for (size_t k = 0; k < scans_ && carried_ + k < outputs; ++k) {
      if (!ctx.output_wanted(carried_ + k)) continue;
      ctx.set_output(carried_ + k, scanned[k].empty()
                                       ? body_.empty_stack(1 + carried_ + k, 0, ctx.device())
                                       : stack(scanned[k], 0, ctx.device()));
    }
  }

 private:
  Subgraph body_;
  size_t carried_;
  size_t scans_ = 0;
};

// Scan (opset 8 with a batch dimension and `sequence_lens`, opset 9+ without).
class ScanKernel : public OpKernel {
 public:
  explicit ScanKernel(const KernelInfo& info) : body_(info, "body"), batched_(info.opset < 9) {
    const Node& node = info.node;
    scan_inputs_ = static_cast<size_t>(node.attr_int("num_scan_inputs"));
    if (batched_ && node.inputs.empty()) node.fail("needs the sequence_lens input (may be empty)");
    size_t declared = node.inputs.size() - (batched_ ? 1 : 0);
    if (scan_inputs_ > declared || scan_inputs_ == 0)
      node.fail("num_scan_inputs ", scan_inputs_, " does not fit its ", node.inputs.size(),
                " inputs");
    states_ = declared - scan_inputs_;
    if (body_.input_count() != states_ + scan_inputs_)
      node.fail("body takes ", body_.input_count(), " inputs, expected ", states_ + scan_inputs_);
    if (body_.output_count() < states_)
      node.fail("body has ", body_.output_count(), " outputs, fewer than the ", states_,
                " state variables");
    scan_outputs_ = body_.output_count() - states_;
    if (node.outputs.size() > states_ + scan_outputs_)
      node.fail("has ", node.outputs.size(), " outputs, the body yields ", states_ + scan_outputs_);
    auto flags = [&](const char* key, size_t count) {
      std::vector<int64_t> v = node.attr_ints(key, std::vector<int64_t>(count, 0));
      if (v.size() != count)
        node.fail("attribute '", key, "' has ", v.size(), " entries, expected ", count);
      return v;
    };
    if (batched_) {
      in_dirs_ = flags("directions", scan_inputs_);
      in_axes_.assign(scan_inputs_, 0);
      out_axes_.assign(scan_outputs_, 0);
      out_dirs_.assign(scan_outputs_, 0);
    } else {
      in_axes_ = flags("scan_input_axes", scan_inputs_);
      in_dirs_ = flags("scan_input_directions", scan_inputs_);
      out_axes_ = flags("scan_output_axes", scan_outputs_);
      out_dirs_ = flags("scan_output_directions", scan_outputs_);
    }
  }

  void compute(KernelContext& ctx) const override {
    size_t first = batched_ ? 1 : 0;
    std::vector<Tensor> states, scans;
    for (size_t i = 0; i < states_; ++i) states.push_back(ctx.input(first + i));
    for (size_t j = 0; j < scan_inputs_; ++j) scans.push_back(ctx.input(first + states_ + j));
    std::vector<Tensor> final_states, outputs;
    if (!batched_) {
      run_scan(ctx, states, scans, final_states, outputs);
    } else {
      run_batched(ctx, states, scans, final_states, outputs);
    }
    for (size_t i = 0; i < states_ && i < ctx.output_count(); ++i)
      ctx.set_output(i, final_states[i]);
    for (size_t k = 0; k < scan_outputs_ && states_ + k < ctx.output_count(); ++k)
      ctx.set_output(states_ + k, outputs[k]);
  }

 private:
  // Scan-8: every input has a leading batch dimension; scan each batch entry separately.
  void run_batched(const KernelContext& ctx, const std::vector<Tensor>& states,
                   const std::vector<Tensor>& scans, std::vector<Tensor>& final_states,
                   std::vector<Tensor>& outputs) const {
    int64_t batch = scans[0].rank() > 0 ? scans[0].shape()[0] : 0;
    auto check_batched = [&](const Tensor& t, const char* what) {
      if (t.rank() < 1 || t.shape()[0] != batch)
        ctx.fail(what, " ", t.describe(), " lacks the batch dimension of size ", batch);
    };
    for (const Tensor& t : states) check_batched(t, "state");
    for (const Tensor& t : scans) {
      check_batched(t, "scan input");
      if (t.rank() < 2) ctx.fail("scan input ", t.describe(), " lacks the sequence dimension");
    }
    if (const Tensor* lens = ctx.optional_input(0)) {
      int64_t length = scans[0].shape()[1];
      for (int64_t b = 0; b < lens->numel(); ++b)
        if (static_cast<int64_t>(lens->to(Device::cpu()).item_as_double(b)) != length)
          ctx.fail("sequence_lens shorter than the scan length (", length, ") are not supported");
    }
    auto entry = [](const Tensor& t, int64_t b) {
      Tensor row = t.narrow(0, b, 1);
      return row.reshape(Shape(t.shape().begin() + 1, t.shape().end()));
    };
    std::vector<std::vector<Tensor>> per_state(states_), per_output(scan_outputs_);
    if (batch == 0) ctx.fail("a batch of size 0 is not supported");
    for (int64_t b = 0; b < batch; ++b) {
      std::vector<Tensor> s, x, fs, out;
      for (const Tensor& t : states) s.push_back(entry(t, b));
      for (const Tensor& t : scans) x.push_back(entry(t, b));
      run_scan(ctx, s, x, fs, out);
      for (size_t i = 0; i < states_; ++i) per_state[i].push_back(fs[i]);
      for (size_t k = 0; k < scan_outputs_; ++k) per_output[k].push_back(out[k]);
    }
    for (auto& parts : per_state) final_states.push_back(stack(parts, 0, ctx.device()));
    for (auto& parts : per_output) outputs.push_back(stack(parts, 0, ctx.device()));
  }

  void run_scan(const KernelContext& ctx, std::vector<Tensor> states,
                const std::vector<Tensor>& scans, std::vector<Tensor>& final_states,
                std::vector<Tensor>& outputs) const {
    std::vector<int64_t> axes;
    int64_t length = -1;
    for (size_t j = 0; j < scan_inputs_; ++j) {
      const Tensor& x = scans[j];
      int64_t a = in_axes_[j];
      if (a < -x.rank() || a >= x.rank())
        ctx.fail("scan input axis ", a, " is out of range for ", x.describe());
      a = a < 0 ? a + x.rank() : a;
      axes.push_back(a);
      if (length < 0) length = x.shape()[a];
      if (x.shape()[a] != length)
        ctx.fail("scan inputs disagree on the sequence length: ", length, " and ", x.shape()[a]);
    }
    std::vector<std::vector<Tensor>> per_iteration(scan_outputs_);
    for (int64_t t = 0; t < length; ++t) {
      std::vector<Value> feeds;
      for (Tensor& s : states) feeds.push_back({std::move(s), nullptr});
      for (size_t j = 0; j < scan_inputs_; ++j) {
        const Tensor& x = scans[j];
        int64_t index = in_dirs_[j] != 0 ? length - 1 - t : t;
        Shape s = x.shape();
        s.erase(s.begin() + axes[j]);
        feeds.push_back({x.narrow(axes[j], index, 1).reshape(s), nullptr});
      }
      std::vector<Value> outs = body_.run(ctx, std::move(feeds));
      for (size_t i = 0; i < outs.size(); ++i)
        if (!outs[i].tensor.defined()) ctx.fail("body output ", i, " is not a tensor");
      for (size_t i = 0; i < states_; ++i) states[i] = outs[i].tensor;
      for (size_t k = 0; k < scan_outputs_; ++k)
        per_iteration[k].push_back(outs[states_ + k].tensor);
    }
    final_states = std::move(states);
    for (size_t k = 0; k < scan_outputs_; ++k) {
      auto& parts = per_iteration[k];
      if (parts.empty()) {
        outputs.push_back(body_.empty_stack(states_ + k, out_axes_[k], ctx.device()));
        continue;
      }
      if (out_dirs_[k] != 0) std::reverse(parts.begin(), parts.end());
      int64_t rank = parts.front().rank() + 1, a = out_axes_[k];
      if (a < -rank || a >= rank)
        ctx.fail("scan output axis ", a, " is out of range for outputs of rank ", rank - 1);
      outputs.push_back(stack(parts, a < 0 ? a + rank : a, ctx.device()));
    }
  }

  Subgraph body_;
  bool batched_;
  size_t scan_inputs_ = 0, states_ = 0, scan_outputs_ = 0;
  std::vector<int64_t> in_axes_, in_dirs_, out_axes_, out_dirs_;
};

DPRUN_REGISTER_KERNEL({.op_type = "If", .since = 1, .factory = make_kernel<IfKernel>});
DPRUN_REGISTER_KERNEL({.op_type = "Loop", .since = 1, .factory = make_kernel<LoopKernel>});
DPRUN_REGISTER_KERNEL({.op_type = "Scan", .since = 8, .factory = make_kernel<ScanKernel>});

}  // namespace
}  // namespace dprun

// The ops' facts (engine/op_facts.h): output types, shapes, 16-bit and layout policy.
namespace dprun {
namespace {
DPRUN_REGISTER_OP_FACTS({.op_type = "If", .dtype = OutputDTypeRule::unknown()});
DPRUN_REGISTER_OP_FACTS({.op_type = "Loop", .dtype = OutputDTypeRule::unknown()});
DPRUN_REGISTER_OP_FACTS({.op_type = "Scan", .dtype = OutputDTypeRule::unknown()});

}  // namespace
}  // namespace dprun
