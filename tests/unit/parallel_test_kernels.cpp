#include "parallel_test_kernels.h"

#include "engine/kernel.h"

namespace dprun::testing {

namespace {

class ScaleRows : public OpKernel {
 public:
  explicit ScaleRows(const KernelInfo&) {}
  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    const Tensor& w = ctx.input(1);
    int64_t width = w.numel();
    if (x.rank() != 2 || x.shape()[1] != width) ctx.fail("x must be [batch, ", width, "]");
    Tensor& y = ctx.allocate_output(0, x.shape(), DType::Float32);
    const float* px = x.data<float>();
    const float* pw = w.data<float>();
    float* py = y.data<float>();
    for (int64_t i = 0; i < x.numel(); ++i) py[i] = px[i] * pw[i % width];
    if (ctx.output_count() > 1) {
      float total = 0;
      for (int64_t i = 0; i < y.numel(); ++i) total += py[i];
      ctx.allocate_output(1, {}, DType::Float32).data<float>()[0] = total;
    }
  }
};

class FailOn : public OpKernel {
 public:
  explicit FailOn(const KernelInfo& info) : mask_(info.node.attr_int("devices")) {}
  void compute(KernelContext& ctx) const override {
    if (mask_ & (int64_t{1} << ctx.device().index)) ctx.fail("injected failure");
    ctx.set_output(0, ctx.input(0));
  }

 private:
  int64_t mask_;
};

class AccumulateMean : public OpKernel {
 public:
  explicit AccumulateMean(const KernelInfo&) {}
  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    const Tensor& state = ctx.input(1);
    int64_t rows = x.shape()[0], width = x.shape()[1];
    Tensor& next = ctx.allocate_output(1, state.shape(), DType::Float32);
    for (int64_t c = 0; c < width; ++c) {
      float sum = 0;
      for (int64_t r = 0; r < rows; ++r) sum += x.data<float>()[r * width + c];
      next.data<float>()[c] = state.data<float>()[c] + sum / static_cast<float>(rows);
    }
    ctx.set_output(0, x);
  }
};

class AddRow : public OpKernel {
 public:
  explicit AddRow(const KernelInfo&) {}
  void compute(KernelContext& ctx) const override {
    const Tensor& a = ctx.input(0);
    const Tensor& b = ctx.input(1);
    int64_t width = b.numel();
    Tensor& y = ctx.allocate_output(0, a.shape(), DType::Float32);
    for (int64_t i = 0; i < a.numel(); ++i)
      y.data<float>()[i] = a.data<float>()[i] + b.data<float>()[i % width];
  }
};

DPRUN_REGISTER_KERNEL({.domain = "dprun.test",
                       .op_type = "ScaleRows",
                       .factory = make_kernel<ScaleRows>});
DPRUN_REGISTER_KERNEL({.domain = "dprun.test",
                       .op_type = "FailOn",
                       .factory = make_kernel<FailOn>});
DPRUN_REGISTER_KERNEL({.domain = "dprun.test",
                       .op_type = "AccumulateMean",
                       .factory = make_kernel<AccumulateMean>});
DPRUN_REGISTER_KERNEL({.domain = "dprun.test",
                       .op_type = "AddRow",
                       .factory = make_kernel<AddRow>});

std::shared_ptr<Graph> base_graph(int64_t width) {
  auto g = std::make_shared<Graph>();
  g->name = "parallel_test";
  g->opset_imports = {{"", 17}, {"dprun.test", 1}};
  g->inputs.push_back(
      {"x", {DType::Float32, SymbolicShape{Dim::named("batch"), Dim::known(width)}}});
  return g;
}

Node node(const std::string& op, std::vector<std::string> in, std::vector<std::string> out) {
  Node n;
  n.name = op + "_node";
  n.op_type = op;
  n.domain = "dprun.test";
  n.inputs = std::move(in);
  n.outputs = std::move(out);
  return n;
}

}  // namespace

std::shared_ptr<Graph> scale_rows_graph(int64_t width, bool with_total) {
  auto g = base_graph(width);
  std::vector<float> w;
  for (int64_t i = 0; i < width; ++i) w.push_back(static_cast<float>(i + 1));
  g->initializers["w"] = Tensor::from_vector<float>({width}, w);
  std::vector<std::string> outs = {"y"};
  if (with_total) outs.push_back("total");
  g->nodes.push_back(node("ScaleRows", {"x", "w"}, outs));
  for (const auto& o : outs) g->outputs.push_back({o, {DType::Float32, std::nullopt}});
  return g;
}

std::shared_ptr<Graph> fail_on_graph(int64_t width, int64_t failing_devices) {
  auto g = base_graph(width);
  Node n = node("FailOn", {"x"}, {"y"});
  Attribute mask;
  mask.kind = Attribute::Kind::Int;
  mask.i = failing_devices;
  n.attributes["devices"] = mask;
  g->nodes.push_back(n);
  g->outputs.push_back({"y", {DType::Float32, std::nullopt}});
  return g;
}

std::shared_ptr<Graph> running_mean_graph(int64_t width) {
  auto g = base_graph(width);
  g->initializers["running"] = Tensor::zeros({width}, DType::Float32);
  g->nodes.push_back(node("AccumulateMean", {"x", "running"}, {"y", "running_next"}));
  g->outputs.push_back({"y", {DType::Float32, std::nullopt}});
  g->state_updates["running_next"] = "running";
  return g;
}

std::shared_ptr<Graph> add_row_graph(int64_t width) {
  auto g = base_graph(width);
  g->inputs.push_back({"row", {DType::Float32, SymbolicShape{Dim::known(width)}}});
  g->nodes.push_back(node("AddRow", {"x", "row"}, {"y"}));
  g->outputs.push_back({"y", {DType::Float32, std::nullopt}});
  return g;
}

std::shared_ptr<Graph> sum_last_dim_graph(int64_t rank) {
  auto g = std::make_shared<Graph>();
  g->name = "sum_last_dim";
  g->opset_imports = {{"", 11}};
  SymbolicShape shape;
  for (int64_t d = 0; d < rank; ++d) {
    std::string name = "d";  // not "d" + to_string(d): GCC 12 gives a false -Wrestrict there
    name += std::to_string(d);
    shape.push_back(Dim::named(name));
  }
  g->inputs.push_back({"x", {DType::Float32, shape}});
  Node sum;
  sum.name = "sum";
  sum.op_type = "ReduceSum";
  sum.inputs = {"x"};
  sum.outputs = {"y"};
  Attribute axes;
  axes.kind = Attribute::Kind::Ints;
  axes.ints = {-1};
  sum.attributes["axes"] = axes;
  g->nodes.push_back(sum);
  g->outputs.push_back({"y", {DType::Float32, std::nullopt}});
  return g;
}

}  // namespace dprun::testing
