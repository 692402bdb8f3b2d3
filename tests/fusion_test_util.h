#pragma once
// What the tests of the CPU's gradient fusions share: a forward graph with its gradient for a
// fed seed dY, the graph compiled with op fusion on or off, and values compared on the scale of
// the reference's largest magnitude.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <utility>

#include "engine/autograd/gradient_builder.h"
#include "engine/model.h"

namespace dprun::testing {

/// `forward` with the gradient `spec` asks for (spec.dy a fed input of `dy_dtype`, when named),
/// whose outputs are the gradients of spec.xs.
inline std::shared_ptr<Graph> with_gradient(const Graph& forward, const GradientSpec& spec,
                                            DType dy_dtype, GradientResult* result = nullptr) {
  GradientResult r = build_gradient(forward, spec);
  auto g = std::make_shared<Graph>(forward);
  if (!spec.dy.empty()) g->inputs.push_back({spec.dy, {dy_dtype, std::nullopt}});
  g->nodes.insert(g->nodes.end(), r.nodes.begin(), r.nodes.end());
  g->outputs.clear();
  for (const std::string& name : r.gradients) g->outputs.push_back({name, {}});
  if (result) *result = std::move(r);
  return g;
}

/// `g` on the CPU in NCHW, with op fusion on or off.
inline Model compiled(std::shared_ptr<Graph> g, bool fuse) {
  return Model(std::move(g), Device::cpu(), {.channels_last = false, .fuse_ops = fuse});
}

/// Each element of `got` within `tol` times the largest magnitude of `want`.
inline void expect_near_in_scale(const Tensor& got, const Tensor& want, double tol) {
  ASSERT_EQ(got.shape(), want.shape());
  double scale = 0;
  for (int64_t i = 0; i < want.numel(); ++i)
    scale = std::max(scale, std::abs(want.item_as_double(i)));
  for (int64_t i = 0; i < want.numel(); ++i)
    ASSERT_NEAR(got.item_as_double(i), want.item_as_double(i), tol * scale) << "element " << i;
}

}  // namespace dprun::testing
