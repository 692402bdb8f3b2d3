#pragma once
// What the CUDA backend tests run on a GPU: the test-only op dprun.test::AddOne, whose one
// kernel is registered for DeviceType::CUDA the way ops/cuda kernels register, and a raw
// kernel launch for stream-order tests.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>

#include "engine/graph.h"

namespace dprun::testing {

/// Adds 1 to `n` floats at `data` (device memory) on `stream`; throws Error when the launch
/// fails.
void add_one_on_stream(float* data, int64_t n, cudaStream_t stream);

/// x: float32[batch, width] -> y = dprun.test::AddOne(x) = x + 1. It has a CUDA kernel only.
std::shared_ptr<Graph> add_one_graph(int64_t width);

/// y = AddOne(CumSum(AddOne(x), axis 1)): CumSum has no CUDA kernel, so on a GPU it runs on the
/// host between two GPU nodes.
std::shared_ptr<Graph> host_fallback_graph(int64_t width);

}  // namespace dprun::testing
