// The CUDA Reduce{Sum,Mean,Max,Min,Prod,L1,L2,LogSum,LogSumExp,SumSquare} for float32,
// float64, float16, bfloat16, int32 and int64, with the semantics of ops/reduce/reduce.cpp
// (compute: ops/reduce/reduce.cu). Other dtypes (bool, 8/16-bit and unsigned integers) have no
// CUDA definition and run on the host.
#include <vector>

#include "engine/kernel.h"
#include "ops/cuda/defs/cuda_compute.h"

namespace dprun {
namespace {

const std::vector<DType> kReduceTypes = {DType::Float32,  DType::Float64, DType::Float16,
                                         DType::BFloat16, DType::Int32,   DType::Int64};

// Input 1 (the axes, in the later opsets) is read on the host.
#define DPRUN_CUDA_REDUCE_DEF(name)                  \
  DPRUN_REGISTER_KERNEL({.op_type = name,            \
                         .since = 1,                 \
                         .device = DeviceType::CUDA, \
                         .dtypes = kReduceTypes,     \
                         .host_inputs = {1},         \
                         .factory = cuda_compute(name)})

DPRUN_CUDA_REDUCE_DEF("ReduceSum");
DPRUN_CUDA_REDUCE_DEF("ReduceMean");
DPRUN_CUDA_REDUCE_DEF("ReduceMax");
DPRUN_CUDA_REDUCE_DEF("ReduceMin");
DPRUN_CUDA_REDUCE_DEF("ReduceProd");
DPRUN_CUDA_REDUCE_DEF("ReduceL1");
DPRUN_CUDA_REDUCE_DEF("ReduceL2");
DPRUN_CUDA_REDUCE_DEF("ReduceLogSum");
DPRUN_CUDA_REDUCE_DEF("ReduceLogSumExp");
DPRUN_CUDA_REDUCE_DEF("ReduceSumSquare");

#undef DPRUN_CUDA_REDUCE_DEF

}  // namespace
}  // namespace dprun
