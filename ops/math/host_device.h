#pragma once
// Marks small math functors usable from host code and, when compiled by nvcc, device code.
// CPU kernels and CUDA kernels instantiate the same functors (DESIGN rule 7).
#if defined(__CUDACC__)
#define DPRUN_HOST_DEVICE __host__ __device__
#else
#define DPRUN_HOST_DEVICE
#endif
