// Finite-difference cases for the RNN, GRU and LSTM gradient rules (ops/recurrent/rnn_grad.cpp):
// every direction, both layouts, with and without initial states, through Y alone, Y_h alone
// (and LSTM's Y_c), GRU's two reset forms, RNN's Relu, LSTM peepholes and two chained layers.
// Sizes stay tiny (seq 3, batch 2, input 3, hidden 2); inputs are random, so a rule that mixed
// up the gates would not match. Then the refusals, a dynamic batch, the training graph through
// an ONNX file, and a tiny LSTM trained data-parallel.
#include <unistd.h>
#include <algorithm>
#include <chrono>
#include <cstdio>

#include "engine/parallel/device_list.h"
#include "engine/training/trainer.h"
#include "gradient_check.h"
#include "loader/onnx_loader.h"

namespace dprun {
namespace {

using namespace dprun::testing;

// One RNN-family node with random inputs of the tiny sizes.
struct Rnn {
  std::string op = "LSTM";
  std::string direction = "forward";
  int64_t layout = 0;
  bool states = true;  // initial_h, and initial_c for LSTM
  bool bias = true;
  bool peepholes = false;  // LSTM's P
  std::map<std::string, Attribute> attrs;
  std::string prefix;  // of the input names, for chained nodes
  int64_t in = 3, hidden = 2, seq = 3, batch = 2;

  int64_t gates() const { return op == "LSTM" ? 4 : op == "GRU" ? 3 : 1; }
  int64_t dirs() const { return direction == "bidirectional" ? 2 : 1; }
  std::string name(const char* n) const { return prefix + n; }

  // The node reading `x`, with outputs Y, Y_h (and Y_c) named from `out`; "" leaves one out.
  Node make(const std::string& x, std::vector<std::string> outs) const {
    std::vector<std::string> ins = {x, name("W"), name("R"), bias ? name("B") : "", ""};
    if (states) ins.push_back(name("H0"));
    if (states && op == "LSTM") ins.push_back(name("C0"));
    if (peepholes) {
      ins.resize(7);
      ins.push_back(name("P"));
    }
    while (ins.back().empty()) ins.pop_back();
    Node n = node(op, ins, outs, attrs);
    n.name = prefix + op;
    n.attributes["hidden_size"] = Attribute::of_int(hidden);
    n.attributes["direction"] = Attribute::of_string(direction);
    if (layout != 0) n.attributes["layout"] = Attribute::of_int(layout);
    return n;
  }
  Node make() const {
    std::vector<std::string> outs = {"Y", "Y_h"};
    if (op == "LSTM") outs.push_back("Y_c");
    return make("X", outs);
  }

  // Inputs other than X.
  std::vector<Input> parameters(uint32_t seed) const {
    const int64_t gh = gates() * hidden, d = dirs();
    const Shape state = layout == 0 ? Shape{d, batch, hidden} : Shape{batch, d, hidden};
    std::vector<Input> v = {testing::in(name("W"), {d, gh, in}, seed + 1),
                            testing::in(name("R"), {d, gh, hidden}, seed + 2)};
    if (bias) v.push_back(testing::in(name("B"), {d, 2 * gh}, seed + 3));
    if (states) v.push_back(testing::in(name("H0"), state, seed + 4));
    if (states && op == "LSTM") v.push_back(testing::in(name("C0"), state, seed + 5));
    if (peepholes) v.push_back(testing::in(name("P"), {d, 3 * hidden}, seed + 6));
    return v;
  }
  std::vector<Input> inputs(uint32_t seed = 10) const {
    Shape x = layout == 0 ? Shape{seq, batch, in} : Shape{batch, seq, in};
    std::vector<Input> v = {testing::in("X", x, seed)};
    for (auto& p : parameters(seed)) v.push_back(std::move(p));
    return v;
  }
};

std::vector<std::string> names_of(const std::vector<Input>& inputs) {
  std::vector<std::string> v;
  for (const auto& i : inputs)
    if (!i.constant) v.push_back(i.name);
  return v;
}

// Finite differences of every input, at opsets with Split's and ReduceSum's two forms; a
// layout 1 node also with a dynamic batch (its dim 0).
void check(const std::vector<Node>& nodes, const std::vector<Input>& inputs, const std::string& y,
           int64_t layout = 0, const std::vector<int64_t>& opsets = {12, 17}) {
  for (int64_t opset : opsets) check_gradients(nodes, inputs, y, names_of(inputs), opset);
  if (layout == 1) check_gradients(nodes, inputs, y, names_of(inputs), 17, Decl::Batch);
}

void check(const Rnn& r, const std::string& y, const std::vector<int64_t>& opsets = {12, 17}) {
  SCOPED_TRACE(r.op + " " + r.direction + " layout " + std::to_string(r.layout) + " y " + y);
  check({r.make()}, r.inputs(), y, r.layout, opsets);
}

// Y, Y_h and Y_c (LSTM) all in the loss: their sum, broadcast over Y's sequence axis.
void check_all_outputs(const Rnn& r) {
  std::vector<Node> nodes = {r.make(), node("Add", {"Y", "Y_h"}, {"sum"})};
  std::string y = "sum";
  if (r.op == "LSTM") nodes.push_back(node("Add", {"sum", "Y_c"}, {y = "sum_c"}));
  check(nodes, r.inputs(), y);
}

// Two layers as PyTorch exports them: a bidirectional layer's Y [seq, 2, batch, H] transposed
// and reshaped to [seq, batch, 2H] feeds a forward layer, whose Y is squeezed to [seq, batch, H].
void check_two_layers(const std::string& op, std::map<std::string, Attribute> attrs = {}) {
  SCOPED_TRACE(op + " two layers");
  Rnn first{.op = op, .direction = "bidirectional", .attrs = attrs, .prefix = "l0_"};
  Rnn second{.op = op, .attrs = attrs, .prefix = "l1_", .in = 2 * first.hidden};
  std::vector<Input> inputs = first.inputs();
  for (auto& p : second.parameters(20)) inputs.push_back(std::move(p));
  inputs.push_back({"shape", Tensor::from_vector<int64_t>({3}, {0, 0, -1}), true});
  inputs.push_back({"axis1", Tensor::from_vector<int64_t>({1}, {1}), true});
  for (int64_t opset : {12, 17}) {
    Node squeeze = opset < 13
                       ? node("Squeeze", {"Y1"}, {"out"}, {{"axes", Attribute::of_ints({1})}})
                       : node("Squeeze", {"Y1", "axis1"}, {"out"});
    std::vector<Node> nodes = {
        first.make("X", {"Y0", "Y0_h"}),
        node("Transpose", {"Y0"}, {"Y0_t"}, {{"perm", Attribute::of_ints({0, 2, 1, 3})}}),
        node("Reshape", {"Y0_t", "shape"}, {"X1"}), second.make("X1", {"Y1"}), squeeze};
    check(nodes, inputs, "out", 0, {opset});
  }
}

// ---- LSTM ----

DPRUN_GRADIENT_CASE(LSTM, LstmEveryDirection) {
  for (const char* direction : {"forward", "reverse", "bidirectional"})
    check(Rnn{.direction = direction}, "Y", {9, 12, 17, 18});
}

DPRUN_GRADIENT_CASE(LSTM, LstmBatchFirst) {
  check(Rnn{.direction = "bidirectional", .layout = 1}, "Y");
  check(Rnn{.direction = "reverse", .layout = 1, .states = false}, "Y_h");
}

DPRUN_GRADIENT_CASE(LSTM, LstmWithoutInitialStates) {
  for (const char* direction : {"forward", "bidirectional"})
    for (const char* y : {"Y", "Y_h", "Y_c"})
      check(Rnn{.direction = direction, .states = false}, y);
  check(Rnn{.states = false, .bias = false}, "Y");
}

DPRUN_GRADIENT_CASE(LSTM, LstmOnlyOneOutputUsed) {
  // The final states alone (Y_h, or only the cell state Y_c), with the other outputs unused or
  // left out of the node.
  for (const char* direction : {"forward", "reverse", "bidirectional"}) {
    check(Rnn{.direction = direction}, "Y_h");
    check(Rnn{.direction = direction}, "Y_c");
  }
  Rnn r{.direction = "bidirectional"};
  check({r.make("X", {"", "Y_h"})}, r.inputs(), "Y_h");
  check({r.make("X", {"", "", "Y_c"})}, r.inputs(), "Y_c");
  check({r.make("X", {"Y"})}, r.inputs(), "Y");
}

DPRUN_GRADIENT_CASE(LSTM, LstmAllOutputsUsed) {
  check_all_outputs(Rnn{.direction = "bidirectional"});
  check_all_outputs(Rnn{.direction = "reverse", .states = false});
}

DPRUN_GRADIENT_CASE(LSTM, LstmPeepholes) {
  for (const char* direction : {"forward", "bidirectional"}) {
    check(Rnn{.direction = direction, .peepholes = true}, "Y");
    check(Rnn{.direction = direction, .peepholes = true}, "Y_c");
    check(Rnn{.direction = direction, .states = false, .peepholes = true}, "Y_h");
  }
  check(Rnn{.direction = "reverse", .layout = 1, .peepholes = true}, "Y");
}

DPRUN_GRADIENT_CASE(LSTM, LstmTwoLayers) {
  check_two_layers("LSTM");
}

DPRUN_GRADIENT_CASE(LSTM, LstmFullSequenceLens) {
  // sequence_lens holding the full length everywhere is the node without it.
  Rnn r{.direction = "bidirectional"};
  Node n = r.make();
  n.inputs[4] = "lens";
  std::vector<Input> inputs = r.inputs();
  inputs.push_back({"lens", Tensor::from_vector<int32_t>({2}, {3, 3}), true});
  check({n}, inputs, "Y");
}

// ---- GRU ----

std::map<std::string, Attribute> reset(int64_t linear_before_reset) {
  return {{"linear_before_reset", Attribute::of_int(linear_before_reset)}};
}

DPRUN_GRADIENT_CASE(GRU, GruEveryDirection) {
  for (int64_t lbr : {0, 1})
    for (const char* direction : {"forward", "reverse", "bidirectional"})
      check(Rnn{.op = "GRU", .direction = direction, .attrs = reset(lbr)}, "Y", {9, 12, 17, 18});
}

DPRUN_GRADIENT_CASE(GRU, GruBatchFirst) {
  for (int64_t lbr : {0, 1}) {
    check(Rnn{.op = "GRU", .direction = "bidirectional", .layout = 1, .attrs = reset(lbr)}, "Y");
    check(Rnn{.op = "GRU", .layout = 1, .states = false, .attrs = reset(lbr)}, "Y_h");
  }
}

DPRUN_GRADIENT_CASE(GRU, GruWithoutInitialStateOrBias) {
  for (int64_t lbr : {0, 1})
    for (const char* y : {"Y", "Y_h"}) {
      check(Rnn{.op = "GRU", .direction = "bidirectional", .states = false, .attrs = reset(lbr)},
            y);
      check(Rnn{.op = "GRU", .states = false, .bias = false, .attrs = reset(lbr)}, y);
    }
}

DPRUN_GRADIENT_CASE(GRU, GruOnlyOneOutputUsed) {
  for (int64_t lbr : {0, 1}) {
    Rnn r{.op = "GRU", .direction = "reverse", .attrs = reset(lbr)};
    check(r, "Y_h");
    check({r.make("X", {"", "Y_h"})}, r.inputs(), "Y_h");
    check_all_outputs(r);
  }
}

DPRUN_GRADIENT_CASE(GRU, GruTwoLayers) {
  check_two_layers("GRU", reset(1));
  check_two_layers("GRU", reset(0));
}

// ---- RNN ----

std::map<std::string, Attribute> activations(std::vector<std::string> names) {
  Attribute a;
  a.kind = Attribute::Kind::Strings;
  a.strings = std::move(names);
  return {{"activations", a}};
}

DPRUN_GRADIENT_CASE(RNN, RnnEveryDirection) {
  for (const char* direction : {"forward", "reverse", "bidirectional"})
    check(Rnn{.op = "RNN", .direction = direction}, "Y", {9, 12, 17, 18});
}

DPRUN_GRADIENT_CASE(RNN, RnnRelu) {
  // PyTorch's nonlinearity='relu'; a bidirectional node may mix Relu and Tanh.
  check(Rnn{.op = "RNN", .attrs = activations({"Relu"})}, "Y");
  check(Rnn{.op = "RNN", .direction = "bidirectional", .attrs = activations({"Relu"})}, "Y_h");
  check(Rnn{.op = "RNN", .direction = "bidirectional", .attrs = activations({"Relu", "Tanh"})},
        "Y");
}

DPRUN_GRADIENT_CASE(RNN, RnnBatchFirstAndStates) {
  check(Rnn{.op = "RNN", .direction = "bidirectional", .layout = 1}, "Y");
  check(Rnn{.op = "RNN", .direction = "reverse", .layout = 1, .states = false}, "Y_h");
  check(Rnn{.op = "RNN", .states = false, .bias = false}, "Y");
  Rnn r{.op = "RNN", .direction = "bidirectional"};
  check({r.make("X", {"", "Y_h"})}, r.inputs(), "Y_h");
  check_all_outputs(r);
}

DPRUN_GRADIENT_CASE(RNN, RnnTwoLayers) {
  check_two_layers("RNN");
  check_two_layers("RNN", activations({"Relu"}));
}

// ---- refusals ----

// Building the gradient of `r`'s node fails with a message containing `what`.
void expect_refused(const Rnn& r, const std::string& what, Decl decl = Decl::Full,
                    std::vector<Input> extra = {}, const std::string& lens = "") {
  Node n = r.make();
  if (!lens.empty()) n.inputs[4] = lens;
  std::vector<Input> inputs = r.inputs();
  for (auto& e : extra) inputs.push_back(std::move(e));
  auto g = make_graph({n}, inputs, "Y", 17, decl);
  try {
    build_gradient(*g, GradientSpec{{"X", "W"}, "Y"});
    ADD_FAILURE() << "expected a refusal naming " << what;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
  }
}

TEST(GradientRnn, RefusesWhatItCannotUnrollExactly) {
  expect_refused(Rnn{}, "the sequence length (dim 0 of X 'X') must be known", Decl::Symbolic);
  expect_refused(Rnn{.layout = 1}, "the sequence length (dim 1 of X 'X')", Decl::None);
  expect_refused(Rnn{.attrs = {{"clip", Attribute::of_float(1)}}}, "clip is not supported");
  expect_refused(Rnn{.attrs = {{"input_forget", Attribute::of_int(1)}}}, "input_forget=1");
  expect_refused(Rnn{.attrs = activations({"Sigmoid", "Tanh", "Relu"})},
                 "activation 'Relu' is not supported");
  expect_refused(Rnn{.op = "GRU", .attrs = activations({"HardSigmoid", "Tanh"})},
                 "activation 'HardSigmoid'");
  expect_refused(Rnn{.op = "RNN", .attrs = activations({"LeakyRelu"})}, "activation 'LeakyRelu'");
  expect_refused(Rnn{}, "sequence_lens holds 2", Decl::Full,
                 {{"lens", Tensor::from_vector<int32_t>({2}, {3, 2}), true}}, "lens");
  expect_refused(Rnn{}, "sequence_lens 'lens' is not a constant", Decl::Full,
                 {{"lens", Tensor::from_vector<int32_t>({2}, {3, 3})}}, "lens");
}

// ---- dynamic batch, ONNX file, training ----

// The gradients of every input of `r`'s node for dY = ones, from a training graph of `forward`.
std::vector<Tensor> run_training(std::shared_ptr<Graph> forward, const std::vector<Input>& inputs) {
  auto train = training_graph(*forward, names_of(inputs));
  std::vector<Tensor> feeds = feeds_of(inputs);
  Tensor y = run_forward(forward, feeds);
  feeds.push_back(random_tensor(y.shape(), -1, 1, 3));
  Model m(train, Device::cpu());
  return m.run(feeds);
}

TEST(GradientRnn, DynamicBatchGivesTheStaticBatchsGradients) {
  // Layout 0 with X [3, batch, 3] and the states [dirs, batch, H]: built once, run at batch 4.
  for (const char* op : {"LSTM", "GRU", "RNN"}) {
    SCOPED_TRACE(op);
    Rnn r{.op = op, .direction = "bidirectional", .batch = 4};
    std::vector<Input> inputs = r.inputs();
    auto dynamic = make_graph({r.make()}, inputs, "Y", 17, Decl::Full);
    for (auto& in : dynamic->inputs)
      if (in.name == "X" || in.name == "H0" || in.name == "C0")
        in.type.shape->at(1) = Dim::named("batch");
    std::vector<Tensor> got = run_training(dynamic, inputs);
    std::vector<Tensor> want =
        run_training(make_graph({r.make()}, inputs, "Y", 17, Decl::Full), inputs);
    ASSERT_EQ(got.size(), want.size());
    for (size_t k = 0; k < got.size(); ++k) {
      ASSERT_EQ(got[k].shape(), want[k].shape());
      for (int64_t i = 0; i < got[k].numel(); ++i)
        EXPECT_EQ(got[k].item_as_double(i), want[k].item_as_double(i));
    }
  }
}

TEST(GradientRnn, TrainingGraphPassesTheOnnxCheckerAndRunsFromAFile) {
  // Saved and loaded (the loader runs the ONNX checker and shape inference), the training
  // graph gives the same gradients.
  for (int64_t opset : {12, 17}) {
    for (const Rnn& r :
         {Rnn{.direction = "bidirectional", .peepholes = true}, Rnn{.op = "GRU", .attrs = reset(1)},
          Rnn{.op = "RNN", .direction = "reverse"}}) {
      SCOPED_TRACE(r.op + " opset " + std::to_string(opset));
      std::vector<Input> inputs = r.inputs();
      auto forward = make_graph({r.make()}, inputs, "Y", opset, Decl::Full);
      std::vector<Tensor> feeds = feeds_of(inputs);
      Tensor y = run_forward(forward, feeds);
      int symbol = 0;
      forward->outputs[0].type = {DType::Float64, declare(y.shape(), Decl::Full, symbol)};
      auto train = training_graph(*forward, names_of(inputs));
      train->inputs.back().type.shape = declare(y.shape(), Decl::Full, symbol);
      for (size_t k = 0; k < inputs.size(); ++k)
        train->outputs[k].type = {DType::Float64,
                                  declare(inputs[k].value.shape(), Decl::Full, symbol)};
      std::string path = ::testing::TempDir() + "gradient_rnn_" + std::to_string(::getpid()) + "_" +
                         r.op + ".onnx";
      save_graph(*train, train->initializers, path);
      std::shared_ptr<Graph> loaded;
      ASSERT_NO_THROW(loaded = load_graph(path));
      std::remove(path.c_str());
      feeds.push_back(random_tensor(y.shape(), -1, 1, 3));
      std::vector<Tensor> a = Model(train, Device::cpu()).run(feeds);
      std::vector<Tensor> b = Model(loaded, Device::cpu()).run(feeds);
      ASSERT_EQ(a.size(), b.size());
      for (size_t k = 0; k < a.size(); ++k)
        for (int64_t i = 0; i < a[k].numel(); ++i)
          EXPECT_EQ(a[k].item_as_double(i), b[k].item_as_double(i));
    }
  }
}

// A batch-first LSTM (seq 8, input 8, hidden 16) with a linear head on its flattened output,
// float32 parameters as initializers: x [N, 8, 8] -> y [N, 4].
std::shared_ptr<Graph> tiny_lstm() {
  const int64_t seq = 8, in = 8, hidden = 16, out = 4;
  auto g = std::make_shared<Graph>();
  g->name = "tiny_lstm";
  g->opset_imports[""] = 17;
  g->inputs.push_back(
      {"x", {DType::Float32, SymbolicShape{Dim::named("N"), Dim::known(seq), Dim::known(in)}}});
  Rnn r{.layout = 1, .states = false, .in = in, .hidden = hidden, .seq = seq};
  for (const auto& p : r.parameters(40)) g->initializers[p.name] = to_float32(p.value);
  g->initializers["head"] = to_float32(random_tensor({seq * hidden, out}, -0.2, 0.2, 50));
  g->initializers["flat"] = Tensor::from_vector<int64_t>({2}, {0, -1});
  g->nodes = {r.make("x", {"Y"}), node("Reshape", {"Y", "flat"}, {"Y_flat"}),
              node("MatMul", {"Y_flat", "head"}, {"y"})};
  g->outputs.push_back({"y", {DType::Float32, SymbolicShape{Dim::named("N"), Dim::known(out)}}});
  return g;
}

TEST(GradientRnn, TinyLstmTrainsDataParallel) {
  // SGD steps on a fixed batch of 16: the loss falls, two CPU devices (8 rows each) follow one
  // device's steps, and the time of a step is printed.
  Tensor x = to_float32(random_tensor({16, 8, 8}, -1, 1, 60));
  Tensor target = to_float32(random_tensor({16, 4}, -1, 1, 61));
  auto run = [&](const char* devices) {
    auto model = std::make_shared<Model>(tiny_lstm(), Device::cpu(0));
    TrainerOptions options;
    options.training.loss.kind = LossKind::Mse;
    options.parallel.device_ids = parse_device_list(devices);
    Trainer trainer(model, options);
    Sgd sgd(trainer.parameters(), {.lr = 0.05});
    std::vector<double> losses = {trainer.step({x}, target, sgd)};  // warms up
    std::vector<double> ms;
    for (int s = 0; s < 10; ++s) {
      const auto start = std::chrono::steady_clock::now();
      losses.push_back(trainer.step({x}, target, sgd));
      ms.push_back(
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
              .count());
    }
    std::sort(ms.begin(), ms.end());  // the fastest and the median: a busy machine slows some
    std::printf(
        "[ tiny LSTM ] %s: %.2f ms (fastest), %.2f ms (median) per training step (batch "
        "16, seq 8, in 8, hidden 16)\n",
        devices, ms.front(), ms[ms.size() / 2]);
    EXPECT_LT(losses.back(), losses.front() * 0.9);
    return losses;
  };
  std::vector<double> one = run("cpu:0"), two = run("cpu:0,cpu:1");
  for (size_t s = 0; s < one.size(); ++s) EXPECT_NEAR(two[s], one[s], 1e-5 * (1 + one[s]));
}

}  // namespace
}  // namespace dprun
