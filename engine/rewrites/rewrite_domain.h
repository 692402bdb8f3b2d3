#pragma once
// The domain of the nodes that backends' graph rewrites introduce (fused ops, channels-last
// ops): "dprun", opset 1. Only kernels registered for this domain run them; a model file never
// holds them.

namespace dprun {

/// The domain and opset of the nodes graph rewrites introduce.
inline constexpr const char* kRewriteDomain = "dprun";

}  // namespace dprun
