#pragma once
// Plumbing shared by the cuDNN-backed kernels (conv.cpp, conv_transpose.cpp, pool.cpp,
// batch_norm.cpp, lrn.cpp; float32, and float16/bfloat16 where a kernel says so): descriptors
// that destroy themselves, cuDNN's int arguments, the
// lifting of 1-D windows to the 2-D ones cuDNN wants, the choice of a convolution algorithm
// without tensor-op (TF32) math, and strided copies between NCHW tensors (explicit padding and
// cropping where cuDNN's symmetric padding cannot say what ONNX asks).
//
// Status checks go through cudnn_check (engine/backends/cuda/cuda_check.h): the message names
// the call, then cudnnGetErrorString. Every call queues work on the run's stream and returns.
#include <cudnn.h>

#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/backends/cuda/cuda_check.h"
#include "engine/backends/cuda/cuda_execution_context.h"
#include "engine/half.h"
#include "engine/kernel.h"
#include "ops/common/conv_util.h"
#include "ops/cuda/defs/node_checks.h"

namespace dprun::cudnn {

/// `value` as the int cuDNN takes; fails naming `what` when it does not fit.
inline int to_int(int64_t value, const KernelContext& ctx, const char* what) {
  if (value < INT_MIN || value > INT_MAX)
    ctx.fail(what, " ", value, " is beyond cuDNN's int range");
  return static_cast<int>(value);
}

inline std::vector<int> to_ints(const std::vector<int64_t>& values, const KernelContext& ctx,
                                const char* what) {
  std::vector<int> out;
  out.reserve(values.size());
  for (int64_t v : values) out.push_back(to_int(v, ctx, what));
  return out;
}

/// Row-major strides of a dense tensor of `dims`.
inline std::vector<int64_t> dense_strides(const std::vector<int64_t>& dims) {
  std::vector<int64_t> strides(dims.size(), 1);
  for (size_t i = dims.size(); i-- > 1;) strides[i - 1] = strides[i] * dims[i];
  return strides;
}

/// Owns one cuDNN descriptor from construction to destruction.
template <class Handle, cudnnStatus_t (*Create)(Handle*), cudnnStatus_t (*Destroy)(Handle)>
class Descriptor {
 public:
  explicit Descriptor(const char* create_call) { cudnn_check(Create(&handle_), create_call); }
  ~Descriptor() { Destroy(handle_); }
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  operator Handle() const { return handle_; }

 private:
  Handle handle_ = nullptr;
};

/// cuDNN's data type for float32, float16 and bfloat16 tensors (float for any other dtype).
inline cudnnDataType_t data_type_of(DType dtype) {
  return dtype == DType::Float16    ? CUDNN_DATA_HALF
         : dtype == DType::BFloat16 ? CUDNN_DATA_BFLOAT16
                                    : CUDNN_DATA_FLOAT;
}

/// A tensor of `dims` (3 to 8 of them) with `strides`, dense row-major when empty, of `type`.
class TensorDesc : public Descriptor<cudnnTensorDescriptor_t, cudnnCreateTensorDescriptor,
                                     cudnnDestroyTensorDescriptor> {
 public:
  TensorDesc(const KernelContext& ctx, const std::vector<int64_t>& dims,
             std::vector<int64_t> strides = {}, cudnnDataType_t type = CUDNN_DATA_FLOAT)
      : Descriptor("cudnnCreateTensorDescriptor") {
    if (strides.empty()) strides = dense_strides(dims);
    const std::vector<int> d = to_ints(dims, ctx, "tensor dim"),
                           s = to_ints(strides, ctx, "tensor stride");
    cudnn_check(
        cudnnSetTensorNdDescriptor(*this, type, static_cast<int>(d.size()), d.data(), s.data()),
        "cudnnSetTensorNdDescriptor of [", shape_to_string(dims), "]");
  }
};

/// NCHW filters [K, C / group, k...] of `type`.
class FilterDesc : public Descriptor<cudnnFilterDescriptor_t, cudnnCreateFilterDescriptor,
                                     cudnnDestroyFilterDescriptor> {
 public:
  FilterDesc(const KernelContext& ctx, const std::vector<int64_t>& dims,
             cudnnDataType_t type = CUDNN_DATA_FLOAT)
      : Descriptor("cudnnCreateFilterDescriptor") {
    const std::vector<int> d = to_ints(dims, ctx, "filter dim");
    cudnn_check(cudnnSetFilterNdDescriptor(*this, type, CUDNN_TENSOR_NCHW,
                                           static_cast<int>(d.size()), d.data()),
                "cudnnSetFilterNdDescriptor of [", shape_to_string(dims), "]");
  }
};

/// A grouped cross-correlation (what ONNX calls Conv) with symmetric `pads`, summing in float32
/// whatever the tensors' type. In FMA math unless `allow_tf32`: no tensor-op (TF32) kernels, so
/// float32 results stay within float rounding of the CPU's. With `allow_tf32` cuDNN's default
/// math, which lets float32 run on TF32 tensor cores; 16-bit tensors take tensor-op math
/// (set_math). set_math then takes the math type of the algorithm chosen (pick_algorithm).
class ConvDesc : public Descriptor<cudnnConvolutionDescriptor_t, cudnnCreateConvolutionDescriptor,
                                   cudnnDestroyConvolutionDescriptor> {
 public:
  ConvDesc(const KernelContext& ctx, const std::vector<int64_t>& pads,
           const std::vector<int64_t>& strides, const std::vector<int64_t>& dilations,
           int64_t group, bool allow_tf32 = false)
      : Descriptor("cudnnCreateConvolutionDescriptor") {
    const std::vector<int> p = to_ints(pads, ctx, "pad"), s = to_ints(strides, ctx, "stride"),
                           d = to_ints(dilations, ctx, "dilation");
    cudnn_check(
        cudnnSetConvolutionNdDescriptor(*this, static_cast<int>(p.size()), p.data(), s.data(),
                                        d.data(), CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
        "cudnnSetConvolutionNdDescriptor");
    cudnn_check(cudnnSetConvolutionGroupCount(*this, to_int(group, ctx, "group")),
                "cudnnSetConvolutionGroupCount");
    set_math(allow_tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH);
  }

  void set_math(cudnnMathType_t math) {
    cudnn_check(cudnnSetConvolutionMathType(*this, math), "cudnnSetConvolutionMathType");
  }
};

/// A pooling window with symmetric `pads`.
class PoolDesc : public Descriptor<cudnnPoolingDescriptor_t, cudnnCreatePoolingDescriptor,
                                   cudnnDestroyPoolingDescriptor> {
 public:
  PoolDesc(const KernelContext& ctx, cudnnPoolingMode_t mode, const std::vector<int64_t>& window,
           const std::vector<int64_t>& pads, const std::vector<int64_t>& strides)
      : Descriptor("cudnnCreatePoolingDescriptor") {
    const std::vector<int> w = to_ints(window, ctx, "window"), p = to_ints(pads, ctx, "pad"),
                           s = to_ints(strides, ctx, "stride");
    cudnn_check(
        cudnnSetPoolingNdDescriptor(*this, mode, CUDNN_PROPAGATE_NAN, static_cast<int>(w.size()),
                                    w.data(), p.data(), s.data()),
        "cudnnSetPoolingNdDescriptor of window [", shape_to_string(window), "]");
  }
};

/// An elementwise float32 operation of cudnnOpTensor (NaN propagated).
class OpTensorDesc : public Descriptor<cudnnOpTensorDescriptor_t, cudnnCreateOpTensorDescriptor,
                                       cudnnDestroyOpTensorDescriptor> {
 public:
  explicit OpTensorDesc(cudnnOpTensorOp_t op) : Descriptor("cudnnCreateOpTensorDescriptor") {
    cudnn_check(cudnnSetOpTensorDescriptor(*this, op, CUDNN_DATA_FLOAT, CUDNN_PROPAGATE_NAN),
                "cudnnSetOpTensorDescriptor");
  }
};

/// The geometry with a 1-D window lifted to 2-D (a trailing spatial dim of 1), since cuDNN's
/// convolutions and pooling take 2 or 3 spatial dims; 2-D and 3-D geometry is returned as is.
/// The tensors' memory is unchanged: [N, C, L] and [N, C, L, 1] are the same bytes.
inline WindowGeometry lift_1d(WindowGeometry g) {
  if (g.rank() != 1) return g;
  for (auto* v : {&g.kernel, &g.strides, &g.dilations, &g.in, &g.out}) v->push_back(1);
  g.pads_begin.push_back(0);
  g.pads_end.push_back(0);
  return g;
}

/// {n, c, spatial...}.
inline std::vector<int64_t> nc_dims(int64_t n, int64_t c, const std::vector<int64_t>& spatial) {
  std::vector<int64_t> dims{n, c};
  dims.insert(dims.end(), spatial.begin(), spatial.end());
  return dims;
}

/// True when cuDNN can pad as the geometry does: the same padding at both ends of every dim.
inline bool symmetric_pads(const WindowGeometry& g) {
  return g.pads_begin == g.pads_end;
}

/// Copies the box of `box` dims starting at `src_start` in the dense tensor `src` of `src_dims`
/// into the box starting at `dst_start` in the dense tensor `dst` of `dst_dims`, both of dtype
/// `dtype` (float32, float16 or bfloat16; one cudnnTransformTensor over strided views). Nothing
/// is queued when the box is empty.
inline void copy_box(CudaExecutionContext& cuda, const KernelContext& ctx, DType dtype,
                     const void* src, const std::vector<int64_t>& src_dims,
                     const std::vector<int64_t>& src_start, void* dst,
                     const std::vector<int64_t>& dst_dims, const std::vector<int64_t>& dst_start,
                     const std::vector<int64_t>& box) {
  for (int64_t d : box)
    if (d == 0) return;
  const std::vector<int64_t> ss = dense_strides(src_dims), ds = dense_strides(dst_dims);
  int64_t src_offset = 0, dst_offset = 0;
  for (size_t i = 0; i < box.size(); ++i) {
    src_offset += src_start[i] * ss[i];
    dst_offset += dst_start[i] * ds[i];
  }
  const TensorDesc src_desc(ctx, box, ss, data_type_of(dtype)),
      dst_desc(ctx, box, ds, data_type_of(dtype));
  const float one = 1.f, zero = 0.f;  // cuDNN's scaling factors are float for these types
  const size_t size = dtype_size(dtype);
  cudnn_check(cudnnTransformTensor(cuda.cudnn(), &one, src_desc,
                                   static_cast<const char*>(src) + src_offset * size, &zero,
                                   dst_desc, static_cast<char*>(dst) + dst_offset * size),
              "cudnnTransformTensor of a [", shape_to_string(box), "] box");
}

/// x, a dense float32, float16 or bfloat16 [N, C, spatial...] on the GPU, copied into a new
/// tensor of its dtype whose spatial dims are `before` + spatial + `after` and whose border holds
/// `fill` (rounded to the dtype): the explicit padding used where cuDNN's own (symmetric) padding
/// cannot express the node's.
inline Tensor pad_spatial(CudaExecutionContext& cuda, const KernelContext& ctx, const Tensor& x,
                          const std::vector<int64_t>& x_dims, const std::vector<int64_t>& before,
                          const std::vector<int64_t>& after, float fill) {
  std::vector<int64_t> dims = x_dims, start(x_dims.size(), 0);
  for (size_t i = 0; i < before.size(); ++i) {
    dims[i + 2] += before[i] + after[i];
    start[i + 2] = before[i];
  }
  Tensor padded = Tensor::empty(Shape(dims.begin(), dims.end()), x.dtype(), ctx.device());
  const TensorDesc desc(ctx, dims, {}, data_type_of(x.dtype()));
  // cudnnSetTensor reads the fill as a value of the tensor's own type.
  const Float16 fill16(fill);
  const BFloat16 fill_b(fill);
  const void* value = x.dtype() == DType::Float16    ? static_cast<const void*>(&fill16)
                      : x.dtype() == DType::BFloat16 ? static_cast<const void*>(&fill_b)
                                                     : static_cast<const void*>(&fill);
  cudnn_check(cudnnSetTensor(cuda.cudnn(), desc, padded.raw_data(), value),
              "cudnnSetTensor of the padded [", shape_to_string(dims), "]");
  copy_box(cuda, ctx, x.dtype(), x.raw_data(), x_dims, std::vector<int64_t>(x_dims.size(), 0),
           padded.raw_data(), dims, start, x_dims);
  return padded;
}

/// Device memory for a cuDNN workspace of `bytes` (through the caching allocator, on the
/// current stream); an empty tensor when none is needed.
inline Tensor workspace(const KernelContext& ctx, size_t bytes) {
  return Tensor::empty({static_cast<int64_t>(bytes)}, DType::UInt8, ctx.device());
}

/// Whether a ranked algorithm can run and, unless `tensor_ops` (--allow-tf32 for float32; always
/// for 16-bit tensors, which tensor cores take as they are), uses no tensor-op math.
template <class Perf>
bool acceptable(const Perf& perf, bool tensor_ops) {
  return perf.status == CUDNN_STATUS_SUCCESS &&
         (tensor_ops || (perf.mathType != CUDNN_TENSOR_OP_MATH &&
                         perf.mathType != CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION));
}

/// The first acceptable algorithm of cuDNN's ranking (`perf`, `count` entries); fails naming
/// `what` when there is none.
template <class Perf>
const Perf& pick_algorithm(const Perf* perf, int count, const KernelContext& ctx, const char* what,
                           bool tensor_ops = false) {
  for (int i = 0; i < count; ++i)
    if (acceptable(perf[i], tensor_ops)) return perf[i];
  ctx.fail("cuDNN offers no ", what, " algorithm", tensor_ops ? "" : " without tensor-op math",
           " for this shape");
}

/// Adds bias [C] to every channel of y ([N, C, spatial...] of `y_dims`), both of bias's dtype.
inline void add_channel_bias(CudaExecutionContext& cuda, const KernelContext& ctx,
                             const Tensor& bias, void* y, const std::vector<int64_t>& y_dims) {
  std::vector<int64_t> b_dims(y_dims.size(), 1);
  b_dims[1] = y_dims[1];
  const cudnnDataType_t type = data_type_of(bias.dtype());
  const TensorDesc b_desc(ctx, b_dims, {}, type), y_desc(ctx, y_dims, {}, type);
  const float one = 1.f;
  cudnn_check(cudnnAddTensor(cuda.cudnn(), &one, b_desc, bias.raw_data(), &one, y_desc, y),
              "cudnnAddTensor of the bias");
}

}  // namespace dprun::cudnn
