#pragma once
// DPRUN_SIMD_CLONES: compile a loop for AVX-512, AVX2 and the x86-64 baseline and pick the best
// the CPU supports when the library loads (GCC function multi-versioning), so that a binary
// built for any x86-64 machine still runs 16 lanes wide where it can (ops/cpu/simd_loops.h).
// Elsewhere (other compilers or architectures) a function is compiled once. So it is under
// ThreadSanitizer: GCC instruments the resolver that picks a clone, and the dynamic loader runs
// that resolver while it relocates the library, before the sanitizer's runtime is set up, so
// every program would die before main.

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__) && \
    !defined(__SANITIZE_THREAD__)
#define DPRUN_SIMD_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define DPRUN_SIMD_CLONES
#endif
