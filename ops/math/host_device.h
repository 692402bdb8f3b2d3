#pragma once
// DPRUN_HOST_DEVICE marks the small elementwise math functors of ops/math. In this build only
// the CPU kernels use them and nothing is compiled by nvcc, so it expands to nothing. It is
// the seam for GPU kernels (DESIGN rule 7): under nvcc it becomes __host__ __device__, so
// that CUDA kernels, once there is a CUDA backend, would run the same functors the CPU tests
// check.
#if defined(__CUDACC__)
#define DPRUN_HOST_DEVICE __host__ __device__
#else
#define DPRUN_HOST_DEVICE
#endif
