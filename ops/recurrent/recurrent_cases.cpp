// RNN, GRU and LSTM, which have no CUDA kernel but gradient rules and oneDNN fast paths, and the
// rewrite domain's RNNGrad, GRUGrad and LSTMGrad (engine/rewrites/rnn_grad_fusion.h: a node's
// whole backward pass on oneDNN). Every direction, both layouts, with and without bias and
// initial states, LSTM's peepholes, GRU's two reset forms, RNN's Relu, every output, the last
// hidden state alone, a shorter sequence_lens (forward only: the rules take full sequences) and
// opset 7, the rules' first. A GPU's plan runs them on the host: on sim:0 the cases check the
// copies around a host fallback, and finite differences check the forward ops' gradient rules.
// Sizes are tiny (seq 3, batch 2, input 3, hidden 2).
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "engine/rewrites/rewrite_domain.h"
#include "op_cases/op_cases.h"
#include "op_test_util.h"

namespace dprun {
namespace {

using testing::floats;
using testing::InputSpec;
using testing::OpCase;

const std::set<std::string> kHostOnlyOps = {"RNN", "GRU", "LSTM", "RNNGrad", "GRUGrad", "LSTMGrad"};

/// One node of the family and its inputs.
struct Rnn {
  std::string op = "LSTM";
  std::string direction = "forward";
  int64_t layout = 0;
  bool bias = true;
  bool states = true;  // initial_h, and initial_c for LSTM
  bool peepholes = false;
  std::vector<int64_t> lens = {};  // sequence_lens, when given
  std::map<std::string, Attribute> attributes = {};
  int64_t in = 3, hidden = 2, seq = 3, batch = 2;

  int64_t gates() const { return op == "LSTM" ? 4 : op == "GRU" ? 3 : 1; }
  int64_t dirs() const { return direction == "bidirectional" ? 2 : 1; }
  Shape x_shape() const { return layout == 0 ? Shape{seq, batch, in} : Shape{batch, seq, in}; }
  Shape state_shape() const {
    return layout == 0 ? Shape{dirs(), batch, hidden} : Shape{batch, dirs(), hidden};
  }
  Shape y_shape() const {
    return layout == 0 ? Shape{seq, dirs(), batch, hidden} : Shape{batch, seq, dirs(), hidden};
  }

  /// The forward inputs X, W, R, B, sequence_lens, initial_h, initial_c, P ("" where absent)
  /// and their specs (none for the absent ones).
  std::pair<std::vector<std::string>, std::vector<InputSpec>> inputs() const {
    const int64_t gh = gates() * hidden;
    std::vector<std::string> names = {"x", "w", "r"};
    std::vector<InputSpec> specs = {floats(x_shape()), floats({dirs(), gh, in}, -1, 1),
                                    floats({dirs(), gh, hidden}, -1, 1)};
    auto add = [&](bool present, const std::string& name, InputSpec spec) {
      names.push_back(present ? name : "");
      if (present) specs.push_back(std::move(spec));
    };
    add(bias, "b", floats({dirs(), 2 * gh}, -1, 1));
    add(!lens.empty(), "lens",
        {.shape = {batch}, .dtype = DType::Int32, .values = lens, .constant = true});
    add(states, "h0", floats(state_shape(), -1, 1));
    if (op == "LSTM") {
      add(states, "c0", floats(state_shape(), -1, 1));
      add(peepholes, "p", floats({dirs(), 3 * hidden}, -1, 1));
    }
    while (names.back().empty()) names.pop_back();
    return {names, specs};
  }

  std::map<std::string, Attribute> all_attributes() const {
    std::map<std::string, Attribute> a = attributes;
    a["hidden_size"] = Attribute::of_int(hidden);
    a["direction"] = Attribute::of_string(direction);
    if (layout != 0) a["layout"] = Attribute::of_int(layout);
    return a;
  }

  std::string name() const {
    std::string n = op + "_" + direction + "_layout" + std::to_string(layout);
    if (!bias) n += "_no_bias";
    if (!states) n += "_no_states";
    if (peepholes) n += "_peepholes";
    if (!lens.empty()) n += "_lens";
    for (const auto& [key, value] : attributes) n += "_" + key;
    return n;
  }

  /// The forward node with outputs Y, Y_h (and Y_c): `outputs` of them, the rest left out.
  OpCase forward(const std::string& what, std::vector<std::string> outputs,
                 int64_t opset = 17) const {
    auto [names, specs] = inputs();
    Node n = testing::make_node(op, names, std::move(outputs));
    n.attributes = all_attributes();
    return {.name = name() + what, .node = n, .inputs = specs, .opset = opset};
  }

  /// The fused backward node: the forward inputs, then dY, dY_h (and dY_c), giving dX, dW, dR,
  /// dB, (nothing for sequence_lens,) d initial_h, d initial_c and dP.
  OpCase backward() const {
    auto [names, specs] = inputs();
    names.resize(8);
    names.insert(names.end(), {"dy", "dy_h"});
    specs.insert(specs.end(), {floats(y_shape()), floats(state_shape())});
    if (op == "LSTM") {
      names.push_back("dy_c");
      specs.push_back(floats(state_shape()));
    }
    std::vector<std::string> outputs = {"dx", "dw", "dr", bias ? "db" : "", ""};
    outputs.push_back(states ? "dh0" : "");
    if (op == "LSTM") {
      outputs.push_back(states ? "dc0" : "");
      outputs.push_back(peepholes ? "dp" : "");
    }
    while (outputs.back().empty()) outputs.pop_back();
    Node n = testing::make_node(op + "Grad", names, outputs);
    n.domain = kRewriteDomain;
    n.attributes = all_attributes();
    return {.name = name() + "_grad", .node = n, .inputs = specs, .opset = 1};
  }
};

std::vector<std::string> outputs_of(const std::string& op) {
  if (op == "LSTM") return {"y", "y_h", "y_c"};
  return {"y", "y_h"};
}

std::vector<Rnn> variants() {
  std::vector<Rnn> v;
  for (const std::string op : {"RNN", "GRU", "LSTM"}) {
    for (const std::string direction : {"forward", "reverse", "bidirectional"})
      v.push_back({.op = op, .direction = direction});
    v.push_back({.op = op, .direction = "bidirectional", .layout = 1});
    v.push_back({.op = op, .bias = false, .states = false});
  }
  v.push_back({.op = "LSTM", .direction = "bidirectional", .peepholes = true});
  v.push_back({.op = "GRU",
               .direction = "bidirectional",
               .attributes = {{"linear_before_reset", Attribute::of_int(1)}}});
  v.push_back({.op = "RNN",
               .direction = "bidirectional",
               .attributes = {{"activations", Attribute{.kind = Attribute::Kind::Strings,
                                                        .strings = {"Relu", "Relu"}}}}});
  return v;
}

void add_forward_cases(std::vector<OpCase>& cases) {
  for (const Rnn& r : variants()) {
    // Y alone (the first output is the one finite differences check), then every output.
    cases.push_back(r.forward("", {"y"}));
    cases.push_back(r.forward("_all_outputs", outputs_of(r.op)));
  }
  for (const std::string op : {"RNN", "GRU", "LSTM"}) {
    // Only the last hidden state, Y left out (finite differences check the first output
    // present).
    cases.push_back(Rnn{.op = op}.forward("_y_h_only", {"", "y_h"}));
    // A shorter sequence for one batch entry, whose states the kernels freeze. The rules take
    // only full sequences: op_cases_gradient_test.cpp expects the refusal.
    cases.push_back(
        Rnn{.op = op, .direction = "bidirectional", .lens = {3, 2}}.forward("", outputs_of(op)));
    // The first opset the rules take, 7 (numpy broadcasting).
    cases.push_back(Rnn{.op = op}.forward("_opset7", outputs_of(op), 7));
  }
}

void add_backward_cases(std::vector<OpCase>& cases) {
  for (const Rnn& r : variants()) cases.push_back(r.backward());
}

DPRUN_OP_CASES_WITH_HOST_ONLY(Recurrent, {}, kHostOnlyOps, add_forward_cases, add_backward_cases);

}  // namespace
}  // namespace dprun
