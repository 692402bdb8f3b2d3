#pragma once
// Which kernels a device registers for a node, asked by graph rewrites that must only produce
// nodes the device runs (op fusion) or must know how it runs a node (the 16-bit pass). Asks the
// registry's definitions (KernelRegistry::candidates); builds no kernel.
#include <optional>
#include <vector>

#include "engine/device.h"
#include "engine/graph.h"
#include "engine/shape.h"

namespace dprun {

/// The declared types of `node`'s inputs in `graph` (nullopt for an absent input or an unknown
/// type).
std::vector<std::optional<TensorType>> declared_input_types(const Graph& graph, const Node& node);

/// Whether `device` has a kernel definition for `node` reading inputs of `types`. A node of the
/// rewrite domain is looked up at its version 1 where `graph` does not import the domain yet
/// (a fusion's node, before the fusion is applied).
bool has_kernel(const Graph& graph, const Node& node,
                const std::vector<std::optional<TensorType>>& types, DeviceType device);

/// has_kernel for the inputs' declared types.
bool has_kernel(const Graph& graph, const Node& node, DeviceType device);

/// has_kernel for the inputs' declared types, counting only the definitions whose `accepts`
/// predicate (if any) takes the node: a fusion makes no node that its device's kernel declines
/// (which would run on the host instead).
bool has_accepting_kernel(const Graph& graph, const Node& node, DeviceType device);

}  // namespace dprun
