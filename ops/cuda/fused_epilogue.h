#pragma once
// What the CUDA kernels of fused products (MatMulBias, FusedGemm; engine/rewrites/op_fusion.h)
// do around the product: the activation fused into them, applied in place where cuBLASLt's
// epilogue cannot (its GELU is the tanh approximation, and it has no sigmoid), and the rows of
// bias an empty sum leaves.
#include <cstdint>
#include <optional>

#include "engine/graph.h"
#include "engine/kernel.h"

namespace dprun {

/// The activation attribute of a fused product: none, or Relu, Sigmoid, Gelu (the erf form,
/// math::GeluErfForm), as fuse_ops writes them.
enum class FusedActivationCuda { None, Relu, Sigmoid, Gelu };

/// The node's "activation" attribute, or nullopt for one the CUDA kernels do not apply
/// (the CPU's Clip and Swish, which only its channels-last rewrite writes).
std::optional<FusedActivationCuda> cuda_fused_activation(const Node& node);

/// data[i] = activation(data[i]) for i < n, on the run's stream; nothing for None.
void apply_fused_activation(const KernelContext& ctx, FusedActivationCuda activation, float* data,
                            int64_t n);

/// y[r, j] = bias[j] for every row r < rows and column j < cols, on the run's stream.
void write_bias_rows(const KernelContext& ctx, const float* bias, float* y, int64_t rows,
                     int64_t cols);

}  // namespace dprun
