#pragma once
// cuDNN's limits that decide whether a node runs on cuDNN, written out for the definitions
// (ops/cuda/defs, compiled without the cuDNN headers). The compute files that call cuDNN
// static_assert that each value is cuDNN's own, so that a cuDNN with other limits fails the
// build instead of planning nodes it then refuses.
namespace dprun::cudnn {

/// CUDNN_BN_MIN_EPSILON: the least epsilon cudnnBatchNormalizationForwardInference takes (0 in
/// cuDNN 9; older cuDNNs had 1e-5). Checked in ops/normalization/batch_norm_cuda.cpp.
inline constexpr double kBnMinEpsilon = 0.0;

/// CUDNN_LRN_MIN_N and CUDNN_LRN_MAX_N: the window sizes (lrnN) cudnnSetLRNDescriptor takes.
/// Checked in ops/normalization/lrn_cuda.cpp, as are the two below.
inline constexpr int kLrnMinN = 1;
inline constexpr int kLrnMaxN = 16;
/// CUDNN_LRN_MIN_K: the least bias (lrnK).
inline constexpr double kLrnMinK = 1e-5;
/// CUDNN_LRN_MIN_BETA: the least beta (lrnBeta).
inline constexpr double kLrnMinBeta = 0.01;

}  // namespace dprun::cudnn
