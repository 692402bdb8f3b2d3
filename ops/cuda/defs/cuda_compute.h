#pragma once
// The link between a CUDA kernel's definition and its compute. The definition (op, opsets,
// dtypes, host inputs, the `accepts` predicate that declines a node) sits beside the op's
// CPU kernel (ops/<family>/<op>_cuda_def.cpp), compiled in every build; the file that computes
// it (<op>.cu, or <op>_cuda.cpp over cuDNN or cuBLAS, compiled only with the CUDA toolkit)
// supplies its factory under the name the definition gives:
//
//   ops/normalization/lrn_cuda_def.cpp:  DPRUN_REGISTER_KERNEL({.op_type = "LRN", ...,
//                                                  .device = DeviceType::CUDA,
//                                                  .accepts = lrn_fits_cudnn,
//                                                  .factory = cuda_compute("LRN")});
//   ops/normalization/lrn_cuda.cpp:       DPRUN_CUDA_COMPUTE("LRN", make_kernel<LrnCudnn>);
//
// So every build plans for cuda:N alike, and the simulated devices (ops/sim) follow the same
// definitions with or without the toolkit. A factory supplied here never declines: declining
// is the definition's `accepts`, which the simulated devices read too.
#include <string>
#include <vector>

#include "engine/kernel.h"

namespace dprun {

/// Supplies the compute called `name`. Returns true to initialise a static; supplying a name
/// twice fails.
bool add_cuda_compute(const std::string& name, KernelFactory factory);

/// A definition's factory: builds the compute called `name`, looked up when a kernel is built
/// (the order of static initialisation does not matter). A build without the CUDA toolkit
/// has no computes: there the factory builds a kernel that fails naming `name` when run, so
/// that plans for cuda:N are made as in a build with it (`dprun inspect --devices cuda:0`),
/// though no cuda:N device exists to run them on.
KernelFactory cuda_compute(const std::string& name);

/// The name of every compute this build supplies, sorted (none without the toolkit).
std::vector<std::string> cuda_compute_names();
/// Every name a definition asked for through cuda_compute(), sorted.
std::vector<std::string> cuda_compute_names_used();

}  // namespace dprun

/// Supplies a CUDA compute: DPRUN_CUDA_COMPUTE("Name", factory) (the factory may hold commas).
#define DPRUN_CUDA_COMPUTE(name, ...)                                                    \
  [[maybe_unused]] static const bool DPRUN_CONCAT(dprun_cuda_compute_added_, __LINE__) = \
      ::dprun::add_cuda_compute(name, __VA_ARGS__)
