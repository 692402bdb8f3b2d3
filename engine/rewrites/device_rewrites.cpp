#include "engine/rewrites/device_rewrites.h"

#include "engine/rewrites/float32_fallback.h"

namespace dprun {

std::shared_ptr<const Graph> rewrite_for_device(const Backend& backend,
                                                std::shared_ptr<const Graph> graph,
                                                const GraphRewriteOptions& options) {
  graph = backend.rewrite_for_kernels(std::move(graph), options);
  if (std::shared_ptr<const Graph> widened = compute_half_in_float(*graph, backend.type()))
    return widened;
  return graph;
}

}  // namespace dprun
