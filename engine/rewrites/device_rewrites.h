#pragma once
// The graph a model compiles for one device type: the backend's own rewrites, then the float32
// fallback every backend shares.
#include <memory>

#include "engine/backend.h"
#include "engine/graph.h"

namespace dprun {

/// The graph to compile for `backend`'s devices: `graph` itself, or a rewritten copy whose new
/// nodes the backend has kernels for. First the backend's own rewrites
/// (Backend::rewrite_for_kernels), then float16 and bfloat16 nodes without a kernel there run
/// their float32 kernels between Casts (engine/rewrites/float32_fallback.h). A copy keeps the
/// graph's inputs, outputs and initializers with their names and types, so a model's parameters
/// and feeds are the same either way.
std::shared_ptr<const Graph> rewrite_for_device(const Backend& backend,
                                                std::shared_ptr<const Graph> graph,
                                                const GraphRewriteOptions& options);

}  // namespace dprun
