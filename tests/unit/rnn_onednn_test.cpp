// The oneDNN forward kernels of RNN, GRU and LSTM (ops/recurrent/rnn_onednn.cpp) against the
// reference kernel (ops/recurrent/rnn.cpp) over every direction, layout, bias, initial state and
// peephole variant, and the nodes and calls they leave to the reference.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "engine/error.h"
#include "graph_test_util.h"
#include "kernel_test_util.h"
#include "op_test_util.h"

namespace dprun {
namespace {

using testing::make_node;
using testing::random_floats;
using testing::run_impl;

struct Variant {
  std::string op;  // RNN, GRU, LSTM
  std::string direction;
  int64_t layout = 0;
  bool bias = true, initial = true, peephole = false, lens = false;
  int64_t linear_before_reset = 0;
  std::string activation;  // RNN: "" (Tanh) or Relu

  std::string describe() const {
    return op + " " + direction + " layout " + std::to_string(layout) + (bias ? " bias" : "") +
           (initial ? " initial" : "") + (peephole ? " peephole" : "") + (lens ? " lens" : "") +
           " lbr " + std::to_string(linear_before_reset) + " " + activation;
  }
};

constexpr int64_t kSeq = 4, kBatch = 3, kIn = 5, kHidden = 6;

// The node and its inputs for one variant (seeded by `seed`).
std::pair<Node, std::vector<Tensor>> case_of(const Variant& v, uint32_t seed) {
  const int64_t G = v.op == "RNN" ? 1 : v.op == "GRU" ? 3 : 4;
  const int64_t dirs = v.direction == "bidirectional" ? 2 : 1, H = kHidden;
  std::vector<std::string> names = {
      "x", "w", "r", v.bias ? "b" : "", v.lens ? "lens" : "", v.initial ? "h0" : ""};
  if (v.op == "LSTM") {
    names.push_back(v.initial ? "c0" : "");
    names.push_back(v.peephole ? "p" : "");
  }
  std::vector<std::string> outputs = {"y", "yh"};
  if (v.op == "LSTM") outputs.push_back("yc");
  Node n = make_node(v.op, names, outputs);
  n.attributes["hidden_size"] = Attribute::of_int(H);
  n.attributes["direction"] = Attribute::of_string(v.direction);
  n.attributes["layout"] = Attribute::of_int(v.layout);
  if (v.op == "GRU") n.attributes["linear_before_reset"] = Attribute::of_int(v.linear_before_reset);
  if (!v.activation.empty()) n.attributes["activations"] = testing::strings_attr({v.activation});
  const Shape x = v.layout == 0 ? Shape{kSeq, kBatch, kIn} : Shape{kBatch, kSeq, kIn};
  const Shape state = v.layout == 0 ? Shape{dirs, kBatch, H} : Shape{kBatch, dirs, H};
  std::vector<Tensor> in = {random_floats(x, seed), random_floats({dirs, G * H, kIn}, seed + 1),
                            random_floats({dirs, G * H, H}, seed + 2)};
  if (v.bias) in.push_back(random_floats({dirs, 2 * G * H}, seed + 3));
  if (v.lens)
    in.push_back(Tensor::from_vector<int32_t>({kBatch}, std::vector<int32_t>(kBatch, kSeq)));
  if (v.initial) in.push_back(random_floats(state, seed + 4));
  if (v.op == "LSTM" && v.initial) in.push_back(random_floats(state, seed + 5));
  if (v.peephole) in.push_back(random_floats({dirs, 3 * H}, seed + 6));
  return {n, in};
}

// Largest |fast - ref| over every output.
double max_difference(const std::vector<Tensor>& fast, const std::vector<Tensor>& ref,
                      const std::string& what) {
  EXPECT_EQ(fast.size(), ref.size()) << what;
  double worst = 0;
  for (size_t o = 0; o < ref.size(); ++o) {
    EXPECT_EQ(shape_to_string(fast[o].shape()), shape_to_string(ref[o].shape())) << what;
    for (int64_t i = 0; i < ref[o].numel(); ++i)
      worst = std::max(worst, std::abs(fast[o].item_as_double(i) - ref[o].item_as_double(i)));
  }
  return worst;
}

std::vector<Variant> variants() {
  std::vector<Variant> out;
  for (const char* dir : {"forward", "reverse", "bidirectional"})
    for (int64_t layout : {0, 1})
      for (bool initial : {false, true}) {
        Variant v{.op = "RNN", .direction = dir, .layout = layout, .initial = initial};
        out.push_back(v);
        v.activation = "Relu";
        out.push_back(v);
        v = Variant{.op = "GRU", .direction = dir, .layout = layout, .initial = initial};
        out.push_back(v);
        v.linear_before_reset = 1;
        out.push_back(v);
        v = Variant{.op = "LSTM", .direction = dir, .layout = layout, .initial = initial};
        out.push_back(v);
        v.peephole = true;
        out.push_back(v);
      }
  out.push_back(Variant{.op = "LSTM", .direction = "forward", .bias = false, .initial = false});
  out.push_back(
      Variant{.op = "GRU", .direction = "forward", .bias = false, .linear_before_reset = 1});
  out.push_back(Variant{.op = "LSTM", .direction = "bidirectional", .lens = true});
  return out;
}

TEST(RnnOnednn, ForwardMatchesReferenceInEveryVariant) {
  uint32_t seed = 100;
  int compared = 0;
  for (const Variant& v : variants()) {
    auto [node, inputs] = case_of(v, seed += 10);
    auto fast = run_impl(node, inputs, 14, "onednn");
    auto ref = run_impl(node, inputs, 14, "reference");
    // float32 against float32 in another order of sums; a gate mixed up differs by ~0.1.
    EXPECT_LT(max_difference(fast, ref, v.describe()), 2e-5) << v.describe();
    ++compared;
  }
  EXPECT_EQ(compared, 75);
}

TEST(RnnOnednn, ForwardRunsOnSeveralThreads) {
  Variant v{.op = "LSTM", .direction = "bidirectional", .peephole = true};
  auto [node, inputs] = case_of(v, 7);
  auto fast = run_impl(node, inputs, 14, "onednn", 2);
  auto ref = run_impl(node, inputs, 14, "reference", 1);
  EXPECT_LT(max_difference(fast, ref, "2 threads"), 2e-5);
}

TEST(RnnOnednn, ShortSequencesRunOnTheReference) {
  Variant v{.op = "GRU", .direction = "bidirectional", .lens = true};
  auto [node, inputs] = case_of(v, 9);
  inputs[4] = Tensor::from_vector<int32_t>({kBatch}, {4, 2, 0});
  auto fast = run_impl(node, inputs, 14, "onednn");
  auto ref = run_impl(node, inputs, 14, "reference");
  EXPECT_EQ(max_difference(fast, ref, "short lens"), 0.0);
}

TEST(RnnOnednn, DeclinesWhatOneDnnDoesNotCompute) {
  auto declined = [](const Variant& v, const char* attr, Attribute value) {
    auto [node, inputs] = case_of(v, 3);
    node.attributes[attr] = value;
    try {
      run_impl(node, inputs, 14, "onednn");
    } catch (const Error& e) {
      return std::string(e.what()).find("no 'onednn' kernel for " + v.op) != std::string::npos;
    }
    return false;
  };
  Variant lstm{.op = "LSTM", .direction = "forward"};
  EXPECT_TRUE(declined(lstm, "clip", Attribute::of_float(1.f)));
  EXPECT_TRUE(declined(lstm, "input_forget", Attribute::of_int(1)));
  EXPECT_TRUE(
      declined(lstm, "activations", testing::strings_attr({"HardSigmoid", "Tanh", "Tanh"})));
  Variant gru{.op = "GRU", .direction = "forward"};
  EXPECT_TRUE(declined(gru, "activations", testing::strings_attr({"Sigmoid", "Relu"})));
  Variant rnn{.op = "RNN", .direction = "forward"};
  EXPECT_TRUE(declined(rnn, "activations", testing::strings_attr({"Sigmoid"})));
}

TEST(RnnOnednn, BadShapesAreReportedByTheReference) {
  Variant v{.op = "LSTM", .direction = "forward"};
  auto [node, inputs] = case_of(v, 5);
  inputs[2] = random_floats({1, 4 * kHidden, kHidden + 1}, 1);  // R
  try {
    run_impl(node, inputs, 14, "onednn");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("R must have shape [1, 24, 6], got [1, 24, 7]"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace dprun
