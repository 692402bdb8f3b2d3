#pragma once
// DPRUN_HOST_DEVICE marks the small elementwise math functors of ops/math (and the index
// helpers of ops/cuda/elementwise_layout.h). Under nvcc it becomes __host__ __device__, so the
// CUDA kernels (ops/cuda) run the same functors the CPU kernels and their tests use (DESIGN
// rule 7); in plain C++ it expands to nothing.
#if defined(__CUDACC__)
#define DPRUN_HOST_DEVICE __host__ __device__
#else
#define DPRUN_HOST_DEVICE
#endif
