#pragma once
// Kernels of the test-only domain "dprun.test", and small graphs built from them, for the
// data-parallel semantics tests. They are deliberately trivial so each test checks the
// parallel machinery, not kernel math.
#include <memory>
#include <string>

#include "engine/graph.h"

namespace dprun::testing {

/// x: float32[batch, width] -> y = x * w (w: float32[width] parameter "w", initialised to
/// 1, 2, 3, ...), plus a 0-d output "total" = sum(y) when with_total is set.
std::shared_ptr<Graph> scale_rows_graph(int64_t width, bool with_total = false);
/// y = x, but a node that throws "injected failure" on devices whose index is in
/// `failing_devices` (a bitmask).
std::shared_ptr<Graph> fail_on_graph(int64_t width, int64_t failing_devices);
/// y = x; state "running" (float32[width], initialised to 0) += mean over rows of x, as an
/// in-place state update (BatchNormalization's running statistics work the same way).
std::shared_ptr<Graph> running_mean_graph(int64_t width);
/// Two inputs a: float32[batch, width], b: float32[width-or-batch...]: y = a + b broadcast
/// over rows (b is meant to be broadcast whole to every replica).
std::shared_ptr<Graph> add_row_graph(int64_t width);
/// x: float32 of `rank` symbolic dims -> y = ReduceSum(x, axes = [-1], keepdims = 1), the
/// standard ONNX op: split along the last dim, each replica sums only its own slice.
std::shared_ptr<Graph> sum_last_dim_graph(int64_t rank);

}  // namespace dprun::testing
