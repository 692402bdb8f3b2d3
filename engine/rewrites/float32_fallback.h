#pragma once
// Float16 and bfloat16 nodes on a backend without a kernel for them: the node's float32 kernel
// runs between Casts, as ONNX Runtime's InsertCastTransformer does. Each input of a 16-bit
// float type is cast to float32, and each output the graph types as 16-bit is cast back, so a
// node's results are rounded to its declared type exactly as a 16-bit kernel that computes in
// float32 rounds them (the CPU's elementwise kernels do this for the ops they take in 16 bits).
// Every backend applies it last (rewrite_for_device, engine/rewrites/device_rewrites.h), so its
// fused and layout nodes are covered too.
#include <memory>

#include "engine/device.h"
#include "engine/graph.h"

namespace dprun {

/// Returns a copy of `graph` in which every node that has a float16 or bfloat16 input and no
/// kernel on `device` for its input types, but a float32 kernel there, runs in float32 between
/// Casts; nullptr when no node is such. Off the CPU, a node without either kernel on `device`
/// (it runs on the host) is rewritten when the CPU has a float32 kernel and no 16-bit one.
/// Nodes holding subgraphs, and nodes with an output of unknown type, are left as they are (a
/// node the rewrite leaves without a kernel fails planning as before). A value read by several
/// such nodes is cast once. Graph inputs, outputs, initializers and every existing value keep
/// their names and types; the new values are named after the value they convert.
std::shared_ptr<Graph> compute_half_in_float(const Graph& graph, DeviceType device);

}  // namespace dprun
