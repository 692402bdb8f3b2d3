#pragma once
// Status checks for the CUDA runtime, cuBLAS, cuDNN and NCCL: a failed call becomes a
// dprun::Error whose message names the call and its context first, then the library's own
// description, e.g. "cuda:0: cudaMalloc of 1048576 bytes: out of memory
// (cudaErrorMemoryAllocation)". Every CUDA API call of the backend goes through these.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <nccl.h>

#include "engine/error.h"

namespace dprun {

/// Throws Error(context..., ": ", description) when `status` is not cudaSuccess. Clears the
/// runtime's last-error state first, so a recoverable failure does not resurface later.
template <class... Context>
void cuda_check(cudaError_t status, const Context&... context) {
  if (status == cudaSuccess) return;
  cudaGetLastError();
  fail(context..., ": ", cudaGetErrorString(status), " (", cudaGetErrorName(status), ")");
}

/// Throws Error(context..., ": ", description) when `status` is not CUBLAS_STATUS_SUCCESS.
template <class... Context>
void cublas_check(cublasStatus_t status, const Context&... context) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  fail(context..., ": ", cublasGetStatusString(status), " (", cublasGetStatusName(status), ")");
}

/// Throws Error(context..., ": ", description) when `status` is not CUDNN_STATUS_SUCCESS.
template <class... Context>
void cudnn_check(cudnnStatus_t status, const Context&... context) {
  if (status == CUDNN_STATUS_SUCCESS) return;
  fail(context..., ": ", cudnnGetErrorString(status), " (cuDNN status ", static_cast<int>(status),
       ")");
}

/// Throws Error(context..., ": ", description) when `status` is not ncclSuccess.
template <class... Context>
void nccl_check(ncclResult_t status, const Context&... context) {
  if (status == ncclSuccess) return;
  fail(context..., ": ", ncclGetErrorString(status), " (NCCL result ", static_cast<int>(status),
       ")");
}

}  // namespace dprun
