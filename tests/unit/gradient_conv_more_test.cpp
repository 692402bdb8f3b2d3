// Finite-difference cases for the Conv rule's grouped and depthwise weight gradients and for the
// ConvTranspose rule (ops/conv/conv_grad.cpp, conv_transpose_grad.cpp), and a float32 training
// graph of depthwise, pointwise and transposed convolutions whose fused weight gradients
// (ConvWeightGrad) must give the unfused graph's gradients.
#include <cmath>
#include <cstdlib>
#include <utility>

#include "engine/training/trainer.h"
#include "gradient_check.h"

namespace dprun {
namespace {

using namespace dprun::testing;

Attribute ints(std::vector<int64_t> v) {
  return Attribute::of_ints(std::move(v));
}

// Checks the gradients of every input at opsets 9 and 17 with full shapes, a symbolic batch and
// (opset 17) every dim symbolic.
void check_declarations(const Node& n, const std::vector<Input>& inputs,
                        const std::vector<std::string>& xs, bool symbolic = true) {
  check_gradients({n}, inputs, "y", xs, 9, Decl::Full);
  check_gradients({n}, inputs, "y", xs, 17, Decl::Full);
  check_gradients({n}, inputs, "y", xs, 17, Decl::Batch);
  if (symbolic) check_gradients({n}, inputs, "y", xs, 17, Decl::Symbolic);
}

// ---- Conv with groups ----

DPRUN_GRADIENT_CASE(Conv, ConvDepthwise) {
  // group = C with channel multiplier 1 and 2, strides and pads; the bias too.
  for (int64_t multiplier : {1, 2}) {
    SCOPED_TRACE("multiplier " + std::to_string(multiplier));
    auto n = node(
        "Conv", {"x", "w", "b"}, {"y"},
        {{"group", Attribute::of_int(3)}, {"strides", ints({2, 1})}, {"pads", ints({1, 1, 1, 1})}});
    check_declarations(n,
                       {in("x", {2, 3, 5, 4}, 1), in("w", {3 * multiplier, 1, 3, 3}, 2),
                        in("b", {3 * multiplier}, 3)},
                       {"x", "w", "b"});
  }
  // No shapes declared: the kernel from kernel_shape, Ci read at run time.
  check_gradients({node("Conv", {"x", "w"}, {"y"},
                        {{"group", Attribute::of_int(2)}, {"kernel_shape", ints({2, 2})}})},
                  {in("x", {2, 2, 4, 3}, 1), in("w", {4, 1, 2, 2}, 2)}, "y", {"x", "w"}, 17,
                  Decl::None);
}

DPRUN_GRADIENT_CASE(Conv, ConvGrouped) {
  // Group 2 with Ci = 2, Co = 3: mixed strides, a dilation and asymmetric pads; the stride leaves
  // input rows unused.
  auto n = node("Conv", {"x", "w", "b"}, {"y"},
                {{"group", Attribute::of_int(2)},
                 {"strides", ints({2, 1})},
                 {"dilations", ints({1, 2})},
                 {"pads", ints({1, 0, 0, 1})}});
  check_declarations(n, {in("x", {2, 4, 6, 5}, 1), in("w", {6, 2, 3, 2}, 2), in("b", {6}, 3)},
                     {"x", "w", "b"});
  // auto_pad VALID with pads written (ignored).
  check_gradients({node("Conv", {"x", "w"}, {"y"},
                        {{"group", Attribute::of_int(2)},
                         {"auto_pad", Attribute::of_string("VALID")},
                         {"pads", ints({1, 1, 1, 1})}})},
                  {in("x", {1, 4, 4, 4}, 1), in("w", {4, 2, 2, 3}, 2)}, "y", {"x", "w"});
}

DPRUN_GRADIENT_CASE(Conv, ConvGrouped1D3D) {
  // 1-D depthwise at stride 3 with asymmetric pads.
  check_declarations(
      node("Conv", {"x", "w"}, {"y"},
           {{"group", Attribute::of_int(4)}, {"strides", ints({3})}, {"pads", ints({2, 0})}}),
      {in("x", {2, 4, 10}, 1), in("w", {8, 1, 3}, 2)}, {"x", "w"});
  // 3-D, group 2, a stride and a dilation.
  check_declarations(node("Conv", {"x", "w", "b"}, {"y"},
                          {{"group", Attribute::of_int(2)},
                           {"strides", ints({2, 1, 1})},
                           {"dilations", ints({1, 1, 2})},
                           {"pads", ints({0, 1, 0, 1, 0, 1})}}),
                     {in("x", {2, 4, 4, 3, 5}, 1), in("w", {6, 2, 2, 2, 2}, 2), in("b", {6}, 3)},
                     {"x", "w", "b"});
}

// ---- ConvTranspose ----

DPRUN_GRADIENT_CASE(ConvTranspose, ConvTransposeStridesPadsOutputPadding) {
  // Strides 2 with output_padding 1 and asymmetric pads; with and without the bias.
  auto n = node(
      "ConvTranspose", {"x", "w", "b"}, {"y"},
      {{"strides", ints({2, 2})}, {"output_padding", ints({1, 0})}, {"pads", ints({1, 0, 0, 1})}});
  check_declarations(n, {in("x", {2, 3, 3, 4}, 1), in("w", {3, 2, 3, 3}, 2), in("b", {2}, 3)},
                     {"x", "w", "b"});
  check_declarations(node("ConvTranspose", {"x", "w"}, {"y"},
                          {{"strides", ints({2, 3})}, {"output_padding", ints({1, 2})}}),
                     {in("x", {2, 2, 3, 2}, 1), in("w", {2, 3, 2, 3}, 2)}, {"x", "w"});
}

DPRUN_GRADIENT_CASE(ConvTranspose, ConvTransposeGroupsDilations) {
  // Group 2 (Ci = 2, Mo = 3) with dilations and a stride.
  check_declarations(node("ConvTranspose", {"x", "w", "b"}, {"y"},
                          {{"group", Attribute::of_int(2)},
                           {"strides", ints({1, 2})},
                           {"dilations", ints({2, 1})},
                           {"pads", ints({0, 1, 1, 0})}}),
                     {in("x", {2, 4, 3, 3}, 1), in("w", {4, 3, 2, 2}, 2), in("b", {6}, 3)},
                     {"x", "w", "b"});
  // Depthwise (group = C) with channel multiplier 2, stride 2, pads and output_padding.
  check_declarations(node("ConvTranspose", {"x", "w"}, {"y"},
                          {{"group", Attribute::of_int(3)},
                           {"strides", ints({2, 2})},
                           {"pads", ints({1, 1, 1, 1})},
                           {"output_padding", ints({1, 1})}}),
                     {in("x", {2, 3, 3, 3}, 1), in("w", {3, 2, 3, 3}, 2)}, {"x", "w"});
  // output_padding at or past the stride (allowed below the dilation): the Conv is cropped.
  check_declarations(node("ConvTranspose", {"x", "w"}, {"y"},
                          {{"dilations", ints({3, 2})}, {"output_padding", ints({2, 1})}}),
                     {in("x", {1, 2, 3, 4}, 1), in("w", {2, 2, 2, 2}, 2)}, {"x", "w"});
}

DPRUN_GRADIENT_CASE(ConvTranspose, ConvTransposeOutputShape) {
  // output_shape sets the pads: 6 of the full 7 rows (one cut at the begin), and 9 of the full 8
  // columns (zero-extended at the end); with the full shape [N, M, ...] too, and auto_pad VALID.
  const std::vector<Input> inputs = {in("x", {2, 2, 3, 3}, 1), in("w", {2, 2, 3, 2}, 2),
                                     in("b", {2}, 3)};
  for (const auto& shape : std::vector<std::vector<int64_t>>{{6, 9}, {2, 2, 6, 9}}) {
    auto n = node("ConvTranspose", {"x", "w", "b"}, {"y"},
                  {{"strides", ints({2, 3})}, {"output_shape", ints(shape)}});
    check_declarations(n, inputs, {"x", "w", "b"}, false);
  }
  check_declarations(node("ConvTranspose", {"x", "w"}, {"y"},
                          {{"strides", ints({2, 2})},
                           {"output_padding", ints({1, 1})},
                           {"auto_pad", Attribute::of_string("VALID")},
                           {"output_shape", ints({5, 8})}}),
                     {in("x", {1, 2, 3, 3}, 1), in("w", {2, 1, 2, 2}, 2)}, {"x", "w"}, false);
}

DPRUN_GRADIENT_CASE(ConvTranspose, ConvTranspose1D3D) {
  // 1-D at stride 3 with pads and output_padding 2.
  check_declarations(
      node("ConvTranspose", {"x", "w", "b"}, {"y"},
           {{"strides", ints({3})}, {"pads", ints({2, 1})}, {"output_padding", ints({2})}}),
      {in("x", {2, 2, 5}, 1), in("w", {2, 3, 3}, 2), in("b", {3}, 3)}, {"x", "w", "b"});
  // 3-D, group 2, strides and output_padding.
  check_declarations(node("ConvTranspose", {"x", "w"}, {"y"},
                          {{"group", Attribute::of_int(2)},
                           {"strides", ints({2, 1, 2})},
                           {"output_padding", ints({1, 0, 0})},
                           {"pads", ints({0, 1, 1, 1, 0, 0})}}),
                     {in("x", {1, 2, 2, 3, 2}, 1), in("w", {2, 2, 2, 2, 2}, 2)}, {"x", "w"});
}

TEST(GradientConvTranspose, RefusesSameAutoPadAndRunTimeOutputShape) {
  auto error = [](const Node& n, Decl decl) {
    auto g = make_graph({n}, {in("x", {1, 2, 3, 3}, 1), in("w", {2, 2, 2, 2}, 2)}, "y", 17, decl);
    try {
      build_gradient(*g, GradientSpec{{"x", "w"}, "y"});
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(error(node("ConvTranspose", {"x", "w"}, {"y"},
                       {{"auto_pad", Attribute::of_string("SAME_UPPER")}}),
                  Decl::Full),
            "[ConvTranspose] node 'ConvTranspose_fwd': gradient: auto_pad SAME_UPPER is not "
            "supported (only NOTSET and VALID)");
  EXPECT_EQ(error(node("ConvTranspose", {"x", "w"}, {"y"}, {{"output_shape", ints({4, 4})}}),
                  Decl::Symbolic),
            "[ConvTranspose] node 'ConvTranspose_fwd': gradient: with output_shape the gradient "
            "needs X's spatial sizes and the kernel's at build time");
}

// ---- float32 training: fused weight gradients against the unfused graph ----

// The gradients of x and every weight of a depthwise (multiplier 2, stride 2), pointwise and
// grouped transposed convolution block with Relus, in float32, compiled with or without op
// fusion; `fused_count` gets the plan's ConvWeightGrad nodes.
std::vector<Tensor> depthwise_block_gradients(bool fuse, int* fused_count) {
  std::vector<Input> inputs = {in("x", {4, 3, 9, 9}, 1), in("dw", {6, 1, 3, 3}, 2),
                               in("db", {6}, 3), in("pw", {4, 6, 1, 1}, 4),
                               in("tw", {4, 2, 2, 2}, 5)};
  for (Input& input : inputs) input.value = to_float32(input.value);
  std::vector<Node> nodes = {node("Conv", {"x", "dw", "db"}, {"c1"},
                                  {{"group", Attribute::of_int(3)},
                                   {"strides", ints({2, 2})},
                                   {"pads", ints({1, 1, 1, 1})}}),
                             node("Relu", {"c1"}, {"r1"}), node("Conv", {"r1", "pw"}, {"c2"}),
                             node("Relu", {"c2"}, {"r2"}),
                             node("ConvTranspose", {"r2", "tw"}, {"y"},
                                  {{"group", Attribute::of_int(2)},
                                   {"strides", ints({2, 2})},
                                   {"pads", ints({0, 0, 1, 1})}})};
  for (size_t k = 0; k < nodes.size(); ++k) nodes[k].name = "n" + std::to_string(k);
  auto forward = make_graph(nodes, inputs, "y", 17, Decl::Batch);
  auto g = std::make_shared<Graph>(*forward);
  GradientResult r =
      build_gradient(*forward, GradientSpec{{"x", "dw", "db", "pw", "tw"}, "y", "dY"});
  g->inputs.push_back({"dY", {DType::Float32, std::nullopt}});
  g->nodes.insert(g->nodes.end(), r.nodes.begin(), r.nodes.end());
  for (const auto& [name, type] : r.value_types) g->value_types[name] = type;
  for (const char* v : {"c1", "r1", "c2", "r2"}) g->value_types[v] = {DType::Float32, std::nullopt};
  g->outputs.clear();
  for (const auto& name : r.gradients) g->outputs.push_back({name, {}});
  Model model(g, Device::cpu(), {.fuse_ops = fuse});
  *fused_count = count_ops(*model.plan()->graph_ptr(), "ConvWeightGrad");
  std::vector<Tensor> feeds = feeds_of(inputs);
  feeds.push_back(to_float32(random_tensor({4, 4, 9, 9}, -1, 1, 7)));
  return model.run(feeds);
}

// The index of `t`'s element of the largest magnitude.
int64_t argmax_abs(const Tensor& t) {
  int64_t best = 0;
  for (int64_t i = 1; i < t.numel(); ++i)
    if (std::abs(t.item_as_double(i)) > std::abs(t.item_as_double(best))) best = i;
  return best;
}

// Runs `run(fuse, &count)` without op fusion, then with it; expects three ConvWeightGrad nodes
// (the depthwise, pointwise and transposed convolutions' weights) in the fused plan and none in
// the other, and results of one size. Returns {unfused, fused}.
template <class Run>
auto without_and_with_fusion(Run run) {
  int fused = 0, unfused = 0;
  auto want = run(false, &unfused);
  auto got = run(true, &fused);
  EXPECT_EQ(unfused, 0);
  EXPECT_EQ(fused, 3);
  EXPECT_EQ(got.size(), want.size());
  return std::pair{want, got};
}

TEST(GradientConvMore, FusedDepthwiseBlockMatchesUnfused) {
  const auto [want, got] = without_and_with_fusion(depthwise_block_gradients);
  ASSERT_EQ(got.size(), want.size());
  for (size_t k = 0; k < want.size(); ++k) {
    SCOPED_TRACE("gradient " + std::to_string(k));
    ASSERT_EQ(got[k].shape(), want[k].shape());
    const Tensor& w = want[k];
    const double scale = std::abs(w.item_as_double(argmax_abs(w)));
    EXPECT_GT(scale, 0) << "all zeros";
    for (int64_t i = 0; i < w.numel(); ++i)
      ASSERT_NEAR(got[k].item_as_double(i), w.item_as_double(i), 1e-5 * scale) << "element " << i;
  }
}

// Three SGD steps of a depthwise, pointwise and grouped transposed convolution model (weights as
// initializers, a dynamic batch) on two CPU devices with the mean squared error; returns the
// losses then the trained parameters, and the training plan's ConvWeightGrad count.
std::vector<double> train_depthwise_model(bool fuse, int* fused_count) {
  std::vector<Input> weights = {in("dw", {6, 1, 3, 3}, 2), in("db", {6}, 3),
                                in("pw", {4, 6, 1, 1}, 4), in("tw", {4, 2, 2, 2}, 5)};
  std::vector<Input> inputs = {in("x", {6, 3, 7, 7}, 1)};
  for (Input& w : weights) {
    w.value = to_float32(w.value);
    w.constant = true;
    inputs.push_back(w);
  }
  inputs[0].value = to_float32(inputs[0].value);
  std::vector<Node> nodes = {node("Conv", {"x", "dw", "db"}, {"c1"},
                                  {{"group", Attribute::of_int(3)},
                                   {"strides", ints({2, 2})},
                                   {"pads", ints({1, 1, 1, 1})}}),
                             node("Relu", {"c1"}, {"r1"}),
                             node("Conv", {"r1", "pw"}, {"c2"}),
                             node("ConvTranspose", {"c2", "tw"}, {"t"},
                                  {{"group", Attribute::of_int(2)}, {"strides", ints({2, 2})}}),
                             node("GlobalAveragePool", {"t"}, {"p"}),
                             node("Flatten", {"p"}, {"y"})};
  for (size_t k = 0; k < nodes.size(); ++k) nodes[k].name = "n" + std::to_string(k);
  auto graph = make_graph(nodes, inputs, "y", 17, Decl::Batch);
  for (const char* v : {"c1", "r1", "c2", "t", "p"})  // as the loader's shape inference gives
    graph->value_types[v] = {DType::Float32, std::nullopt};
  TrainerOptions options;
  options.training.loss.kind = LossKind::Mse;
  options.parallel.device_ids = {Device::cpu(0), Device::cpu(1)};
  // The trainer compiles with op fusion unless DPRUN_NO_FUSION is set.
  if (!fuse) ::setenv("DPRUN_NO_FUSION", "1", 1);
  auto model = std::make_shared<Model>(graph, Device::cpu(0), ModelOptions{.fuse_ops = fuse});
  Trainer trainer(model, options);
  ::unsetenv("DPRUN_NO_FUSION");
  *fused_count = count_ops(*trainer.training_model().plan()->graph_ptr(), "ConvWeightGrad");
  Sgd sgd(trainer.parameters(), {.lr = 0.5});
  const Tensor target = to_float32(random_tensor({6, 4}, -1, 1, 9));
  std::vector<double> out;
  for (int step = 0; step < 3; ++step) out.push_back(trainer.step({inputs[0].value}, target, sgd));
  for (const Tensor& p : trainer.parameters()) {
    const Tensor host = p.to(Device::cpu());
    for (int64_t i = 0; i < host.numel(); ++i) out.push_back(host.item_as_double(i));
  }
  return out;
}

TEST(GradientConvMore, DepthwiseModelTrainsAsUnfused) {
  const auto [want, got] = without_and_with_fusion(train_depthwise_model);
  ASSERT_EQ(got.size(), want.size());
  EXPECT_LT(want[2], want[0]);  // it learns
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR(got[i], want[i], 1e-5 * (1 + std::abs(want[i])))
        << (i < 3 ? "loss " : "value ") << i;
}

}  // namespace
}  // namespace dprun
