#pragma once
// Helpers of the tests of the CPU backend's graph rewrites (fusions over the channels-last
// graph): named nodes, a graph's op types, and a graph run with and without the rewrites.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "engine/backends/cpu/layout_rewrite.h"
#include "engine/model.h"
#include "op_test_util.h"

namespace dprun::testing {

/// A node named after its op and first output, with `attrs`.
inline Node named_node(const std::string& op, std::vector<std::string> in,
                       std::vector<std::string> out, std::map<std::string, Attribute> attrs = {}) {
  Node n = make_node(op, std::move(in), std::move(out));
  n.name = op + "_" + n.outputs[0];
  n.attributes = std::move(attrs);
  return n;
}

/// A named_node of the "dprun" domain with, unless `activation` is empty, that fused activation
/// (Clip's bounds -0.1 and 0.3, those of fused_activation_references(-0.1, 0.3)).
inline Node fused_test_node(const std::string& op, std::vector<std::string> in,
                            std::vector<std::string> out, std::map<std::string, Attribute> attrs,
                            const std::string& activation) {
  Node n = named_node(op, std::move(in), std::move(out), std::move(attrs));
  n.domain = kRewriteDomain;
  if (!activation.empty()) {
    n.attributes["activation"] = Attribute::of_string(activation);
    n.attributes["activation_min"] = Attribute::of_float(-0.1f);
    n.attributes["activation_max"] = Attribute::of_float(0.3f);
  }
  return n;
}

inline std::vector<std::string> op_types(const Graph& g) {
  std::vector<std::string> ops;
  for (const Node& n : g.nodes) ops.push_back(n.op_type);
  return ops;
}

/// Runs `g` on `feeds` as it is (no rewrite) and with the CPU rewrites; expects the same
/// outputs within 1e-5 of each output's largest magnitude, and returns the rewritten graph's op
/// types.
inline std::vector<std::string> expect_rewrite_keeps_results(const std::shared_ptr<Graph>& g,
                                                             const std::vector<Tensor>& feeds) {
  Model plain(g, Device::cpu(), ModelOptions{.channels_last = false, .fuse_ops = false});
  Model rewritten(g, Device::cpu());
  const std::vector<Tensor> want = plain.run(feeds), got = rewritten.run(feeds);
  EXPECT_EQ(got.size(), want.size());
  for (size_t o = 0; o < want.size() && o < got.size(); ++o) {
    EXPECT_EQ(got[o].shape(), want[o].shape()) << "output " << o;
    if (got[o].shape() != want[o].shape()) continue;
    double scale = 1e-6;
    for (int64_t i = 0; i < want[o].numel(); ++i)
      scale = std::max(scale, std::abs(want[o].item_as_double(i)));
    for (int64_t i = 0; i < want[o].numel(); ++i)
      EXPECT_NEAR(got[o].item_as_double(i), want[o].item_as_double(i), 1e-5 * scale)
          << "output " << o << " element " << i;
  }
  return op_types(rewritten.plan()->graph());
}

}  // namespace dprun::testing
