#pragma once
// Channels-last graph rewrite: keeps chains of convolution-family ops in NHWC so the
// NCHW<->NHWC reorders oneDNN's fast convolutions need happen only at the chain's borders.
// It is the CPU backend's graph rewrite (CpuBackend::rewrite_for_kernels): the NHWC ops it
// introduces are kernels that ops/cpu registers.
#include <memory>

#include "engine/graph.h"
#include "engine/rewrites/rewrite_domain.h"

namespace dprun {

/// Returns a rewritten copy of `graph` in which 4-D float32 Conv (with initializer weights)
/// becomes ConvNHWC, pools on NHWC data become MaxPoolNHWC/AveragePoolNHWC/
/// GlobalAveragePoolNHWC, and layout-agnostic ops (unary elementwise, binary arithmetic
/// between two NHWC values, Concat of NHWC values) run on NHWC values unchanged. Transposes are
/// inserted where NHWC values meet anything else; graph outputs keep their names and NCHW layout.
/// NHWC values carry new names (prefix "nhwc/"), so every original name keeps its original type.
/// Subgraphs are not touched. Returns nullptr when no node qualifies (the graph is to be used as it
/// is).
std::shared_ptr<Graph> rewrite_channels_last(const Graph& graph);

}  // namespace dprun
