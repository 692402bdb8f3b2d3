#pragma once
// The CUDA backend's device collectives (Backend::broadcast_coalesced and
// Backend::reduce_add_coalesced) on NCCL, as torch.cuda.nccl does them for torch.nn.parallel:
// one cached communicator clique per ordered GPU list (nccl_clique.h), every tensor of a call
// in one ncclGroupStart/ncclGroupEnd, each rank's calls on its clique stream, which first waits
// for the work queued on the calling thread's current stream of its GPU; the call returns when
// the streams are done. NCCL errors become Error naming the operation, the GPUs, the tensor
// and ncclGetErrorString's text.
//
// Summation order. NCCL specifies no order for ncclReduce's additions: they follow the
// algorithm (ring or tree), channels and chunks NCCL picks for the GPUs, their links and the
// message size, which may change with the NCCL version and NCCL_* settings. A sum of two
// addends does not depend on their order, so on two GPUs each element of a sum equals the
// host's left-to-right a + b; on three or more the additions may be grouped differently from
// dprun's host order (device order, left to right) and differ in the last bits. What that
// means for dprun: on CPU devices, training on one device and on several gives the same bits;
// on GPUs it does not (cuBLAS and cuDNN also reduce a chunk's rows in an order that depends on
// the chunk's size), and one-GPU and multi-GPU training agree within float rounding, not bit
// for bit. The tests hold them to 1e-5 relative.
#include <nccl.h>

#include <vector>

#include "engine/dtype.h"
#include "engine/tensor.h"

namespace dprun {

/// NCCL's element type for summing `dtype`: float32, float64, float16 or bfloat16. Throws
/// Error naming the dtype for any other ("reduce_add on CUDA GPUs: NCCL sums float32,
/// float64, float16 and bfloat16 tensors, not int32").
ncclDataType_t nccl_sum_type(DType dtype);

/// Backend::broadcast_coalesced on NCCL: ncclBroadcast of each tensor's bytes from the
/// sources' GPU (rank 0) to the destination lists' GPUs (ranks 1...).
void nccl_broadcast_coalesced(const std::vector<Tensor>& sources,
                              const std::vector<std::vector<Tensor>>& destinations);

/// Backend::reduce_add_coalesced on NCCL: ncclReduce (sum) of every input list onto the
/// outputs' GPU, whose rank is its list's place in `inputs`. A single list is copied.
void nccl_reduce_add_coalesced(const std::vector<std::vector<Tensor>>& inputs,
                               const std::vector<Tensor>& outputs);

}  // namespace dprun
