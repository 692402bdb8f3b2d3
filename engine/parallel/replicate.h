#pragma once
// replicate(): copies of a model, one per device (torch.nn.parallel.replicate).
#include <memory>
#include <vector>

#include "engine/model.h"

namespace dprun {

/// One replica per device. The replica on devices[0] shares the base's parameter storage
/// and version counter (in-place updates made through it reach the base); the others hold
/// copies. Replicas on devices of the base's type share its Plan; other device types get a
/// plan of their own. Throws Error when `devices` is empty or the base is not on devices[0].
std::vector<std::shared_ptr<Model>> replicate(const Model& model,
                                              const std::vector<Device>& devices);

/// Copies the base's current parameter values into `replica` (same plan layout), in place,
/// and gives the replica a new parameter version (mark_replica_written).
void refresh_replica(const Model& base, Model& replica);
/// refresh_replica for several replicas, with the elements of all parameters split over the
/// worker threads of `workers` (CPU devices, see run_in_parts).
void refresh_replicas(const Model& base, const std::vector<Model*>& replicas,
                      const std::vector<Device>& workers);
/// Gives `replica` a new parameter version after its parameter storage was written, so its
/// kernels drop what they derived from the old values; a no-op for a replica that shares the
/// base's version counter (and storage). Whoever copies into replica storage calls it.
void mark_replica_written(const Model& base, const Model& replica);

}  // namespace dprun
