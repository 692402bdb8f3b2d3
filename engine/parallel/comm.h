#pragma once
// Collective operations between devices (torch.nn.parallel.comm). CPU devices share host
// memory: their copies and sums are host loops, split over the devices' workers. Between GPUs
// they go through the devices' backend (Backend::broadcast_coalesced and
// Backend::reduce_add_coalesced; NCCL for CUDA), one coalesced operation per call.
#include <vector>

#include "engine/tensor.h"

namespace dprun {

/// Copies `tensors` (all on one device) to every device of `devices`
/// (torch.nn.parallel.comm.broadcast_coalesced): result[d][k] is tensors[k] on devices[d];
/// where devices[d] is the tensors' own device, result[d] is `tensors` themselves (shared).
/// When the tensors and every other device are GPUs of one type, all copies are one
/// collective of their backend; otherwise each tensor is copied with Tensor::to.
std::vector<std::vector<Tensor>> broadcast_coalesced(const std::vector<Tensor>& tensors,
                                                     const std::vector<Device>& devices);
/// broadcast_coalesced into existing tensors: copies sources[k] into destinations[d][k] (each
/// list on one device, like the sources in shape and dtype), in place. Lists that share
/// storage with the sources are left alone. The same routing as broadcast_coalesced.
void broadcast_coalesced_into(const std::vector<Tensor>& sources,
                              const std::vector<std::vector<Tensor>>& destinations);

/// Sums `inputs` (one per device, same shape and floating dtype) onto `destination`, adding
/// them in list order so that the result does not depend on timing. Throws naming the input
/// that disagrees in shape or dtype.
Tensor reduce_add(const std::vector<Tensor>& inputs, Device destination);

/// reduce_add for several tensors at once: `inputs[d]` holds device d's tensors, all lists in
/// the same order, and result k is the sum of inputs[0][k], inputs[1][k], ....
///
/// Onto a CPU device the sum is in that order, in host memory (GPU inputs are copied there
/// first); float32 and float64. The elements of all the sums are split over the worker
/// threads of `workers` (CPU devices, see run_in_parts); the results do not depend on the
/// split. Onto a GPU, when every list is on a distinct GPU of the destination's type and one
/// of them is the destination, the sum is one collective of their backend, in the order it
/// chooses (for CUDA, NCCL: see engine/backends/cuda/nccl_collectives.h); the backend says
/// which dtypes it sums. Otherwise the host sum is copied to the destination.
std::vector<Tensor> reduce_add_coalesced(const std::vector<std::vector<Tensor>>& inputs,
                                         Device destination,
                                         const std::vector<Device>& workers = {});

}  // namespace dprun
