// Op cases (tests/op_cases/op_cases.h) of the rewrite domain's fused attention nodes
// (engine/rewrites/attention_fusion.h), which have no CUDA kernel: a GPU's plan runs them on the
// host. ViT's 3-D layout and GPT's 4-D one read through their perms, each mask, the probabilities
// as an output, and the backward with some or all of its gradients. Their values against the
// unfused chain are checked in tests/unit/attention_fusion_test.cpp.
#include <map>
#include <set>
#include <string>
#include <vector>

#include "engine/rewrites/rewrite_domain.h"
#include "op_cases/op_cases.h"

namespace dprun {
namespace {

const std::set<std::string> kCoveredOps = {};
const std::set<std::string> kHostOnlyOps = {"Attention", "AttentionGrad"};

using testing::dims_name;
using testing::floats;
using testing::InputSpec;
using testing::node_with;
using testing::OpCase;

// One layout: Q, K and V as stored, their perms, the scores' Lq x Lk.
struct Layout {
  const char* what;
  Shape stored;
  std::vector<int64_t> perm_q, perm_k, perm_o;
  Shape scores;
};

std::vector<Layout> layouts() {
  return {{"vit", {17, 6, 8}, {1, 0, 2}, {1, 2, 0}, {1, 0, 2}, {6, 17, 17}},
          {"gpt", {2, 9, 3, 4}, {0, 2, 1, 3}, {0, 2, 3, 1}, {0, 2, 1, 3}, {2, 3, 9, 9}}};
}

std::map<std::string, Attribute> attributes(const Layout& l, const std::string& mask) {
  std::map<std::string, Attribute> a = {{"scale", Attribute::of_float(0.35f)},
                                        {"perm_q", Attribute::of_ints(l.perm_q)},
                                        {"perm_k", Attribute::of_ints(l.perm_k)},
                                        {"perm_v", Attribute::of_ints(l.perm_q)},
                                        {"perm_o", Attribute::of_ints(l.perm_o)}};
  if (!mask.empty()) a["mask"] = Attribute::of_string(mask);
  if (mask == "where") {
    a["fill"] = Attribute::of_float(-1e4f);
    a["fill_where"] = Attribute::of_int(1);
  }
  return a;
}

// The mask over the scores' last two dims: floats to add, or a Where's condition.
InputSpec mask_input(const Layout& l, const std::string& mask) {
  const Shape dims(l.scores.end() - 2, l.scores.end());
  if (mask == "add") return floats(dims, -3, 0);
  InputSpec c{dims};
  c.dtype = DType::Bool;
  c.lo = 0;
  c.hi = 1;
  return c;
}

Node fused(const std::string& op, std::vector<std::string> inputs, std::vector<std::string> outputs,
           std::map<std::string, Attribute> attrs) {
  Node n = node_with(op, std::move(inputs), std::move(attrs));
  n.domain = kRewriteDomain;
  n.outputs = std::move(outputs);
  return n;
}

void add_attention_cases(std::vector<OpCase>& cases) {
  for (const Layout& l : layouts())
    for (const std::string mask : {"", "add", "where"})
      for (bool probabilities : {false, true}) {
        std::vector<std::string> inputs = {"q", "k", "v"};
        std::vector<InputSpec> specs = {floats(l.stored), floats(l.stored), floats(l.stored)};
        if (!mask.empty()) {
          inputs.push_back("m");
          specs.push_back(mask_input(l, mask));
        }
        std::vector<std::string> outputs = {"y"};
        if (probabilities) outputs.push_back("p");
        cases.push_back({.name = std::string("Attention_") + l.what + "_" + dims_name(l.stored) +
                                 (mask.empty() ? "" : "_" + mask) + (probabilities ? "_p" : ""),
                         .node = fused("Attention", inputs, outputs, attributes(l, mask)),
                         .inputs = specs,
                         .opset = 1});
      }
}

void add_attention_grad_cases(std::vector<OpCase>& cases) {
  for (const Layout& l : layouts())
    for (const std::string mask : {"", "where"})
      for (const std::vector<std::string>& outputs :
           {std::vector<std::string>{"dq", "dk", "dv"}, std::vector<std::string>{"", "", "dv"},
            std::vector<std::string>{"dq"}}) {
        std::vector<std::string> inputs = {"q", "k", "v", "p", "dy"};
        std::vector<InputSpec> specs = {floats(l.stored), floats(l.stored), floats(l.stored),
                                        floats(l.scores, 0, 1), floats(l.stored)};
        if (!mask.empty()) {
          inputs.push_back("c");
          specs.push_back(mask_input(l, mask));
        }
        std::string wanted;
        for (const std::string& o : outputs) wanted += o.empty() ? "" : "_" + o;
        cases.push_back({.name = std::string("AttentionGrad_") + l.what + "_" +
                                 dims_name(l.stored) + (mask.empty() ? "" : "_" + mask) + wanted,
                         .node = fused("AttentionGrad", inputs, outputs, attributes(l, mask)),
                         .inputs = specs,
                         .opset = 1});
      }
}

DPRUN_OP_CASES_WITH_HOST_ONLY(Attention, kCoveredOps, kHostOnlyOps, add_attention_cases,
                              add_attention_grad_cases);

}  // namespace
}  // namespace dprun
