#pragma once
// The layout rewrite's step for an op with an NHWC kernel of its own (Conv, the poolings,
// BatchNormalization; their kernels are in ops/channels_last/).
#include "engine/layout_rule.h"
#include "engine/rewrites/rewrite_domain.h"

namespace dprun {

/// Runs the node as `op_type` + "NHWC" of the rewrites' domain.
inline void use_nhwc_kernel(LayoutEdit& edit) {
  edit.node.op_type += "NHWC";
  edit.node.domain = kRewriteDomain;
}

}  // namespace dprun
