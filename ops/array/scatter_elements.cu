// The compute of the CUDA ScatterElements (and Scatter, its name before opset 11; defined in
// ops/array/scatter_elements_cuda_def.cpp), so that the gradients of MaxPool and Gather (reduction
// "add" into zeros) stay on the GPU. The output is a copy of data; then every update is combined
// into it with the CPU kernel's scatter_combine, and each output element receives its updates in
// the CPU kernel's order (increasing position in the indices, row-major), without atomics, so every
// reduction, float "add" included, gives the CPU's result bit for bit on every run. Two ways,
// chosen by shape:
// - Lines: a line is the updates that share every coordinate but the axis one, and it writes
//   only into the output line with the same coordinates. One thread walks each line in
//   increasing order. Chosen when there are many lines or they are short.
// - Sorted: few long lines (MaxPool's gradient is one line of the flattened input) would leave
//   the GPU nearly idle. The target offset of every update is computed, the (target, position)
//   pairs are sorted by target with CUB's stable radix sort, and one thread folds each run of
//   equal targets in order of position.
// "none" moves elements as unsigned integers of their size (any dtype); add, mul, max and min
// run for float32, float64, float16, bfloat16, the integer types and bool. A 16-bit output
// element and its update are combined in float and rounded once per update, as the CPU kernel
// does, so float16 and bfloat16 training graphs (the gradient of an embedding's Gather) keep
// their scatters on the GPU.
//
// Index validation: indices that are a constant of the plan are validated on the host from the
// plan's copy and fail like the CPU kernel. Other indices are not read on the host: an update
// whose index is out of range is skipped on the device, where the CPU kernel fails. Gather's
// policy (copy the indices back and wait) would put a device-to-host copy and a wait for the GPU
// into every training step for each of these nodes, which is the round trip this kernel exists
// to remove; and the indices of those gradient graphs are in range by construction (MaxPool's
// argmax) or were validated by the forward node that read them (Gather's).
#include <cuda_runtime_api.h>
#include <cub/device/device_radix_sort.cuh>

#include <algorithm>
#include <bit>
#include <cstdint>

#include "engine/backends/cuda/cuda_check.h"
#include "ops/array/scatter.h"
#include "ops/common/data_movement.h"
#include "ops/cuda/defs/cuda_compute.h"
#include "ops/cuda/elementwise.cuh"
#include "ops/cuda/half_convert.cuh"

namespace dprun {
namespace {

/// Most dims of the indices after merging.
constexpr int kMaxDims = 16;
/// The lines way is taken from this many lines, or for lines of at most kShortLine updates.
constexpr int64_t kManyLines = int64_t{1} << 14;
constexpr int64_t kShortLine = 16;

/// The indices' dims (unit dims dropped, neighbours merged where both layouts allow), with their
/// element strides in the indices (and updates) and in the output. Passed by value.
struct ScatterLayout {
  int rank = 0;
  int axis = 0;  // the scatter axis among the merged dims
  int64_t dims[kMaxDims];
  int64_t index_strides[kMaxDims];
  int64_t out_strides[kMaxDims];
  int64_t axis_size = 0;  // data's dim along the axis
};

ScatterLayout scatter_layout(const KernelContext& ctx, const Shape& ds, const Shape& is,
                             int64_t axis) {
  const std::vector<int64_t> from = contiguous_strides(is), to = contiguous_strides(ds);
  std::vector<int64_t> dims, index_strides, out_strides;
  int merged_axis = -1;
  for (size_t d = 0; d < is.size(); ++d) {
    const bool is_axis = static_cast<int64_t>(d) == axis;
    if (!is_axis && is[d] == 1) continue;
    // The axis neither merges into the dim before it nor takes in the one after it.
    const bool after_axis = merged_axis == static_cast<int>(dims.size()) - 1;
    if (!is_axis && !dims.empty() && !after_axis && index_strides.back() == from[d] * is[d] &&
        out_strides.back() == to[d] * is[d]) {
      dims.back() *= is[d];
      index_strides.back() = from[d];
      out_strides.back() = to[d];
      continue;
    }
    if (is_axis) merged_axis = static_cast<int>(dims.size());
    dims.push_back(is[d]);
    index_strides.push_back(from[d]);
    out_strides.push_back(to[d]);
  }
  if (dims.size() > static_cast<size_t>(kMaxDims))
    ctx.fail("supports indices of up to ", kMaxDims, " dimensions after merging, ",
             shape_to_string(is), " has ", dims.size());
  ScatterLayout l;
  l.rank = static_cast<int>(dims.size());
  l.axis = merged_axis;
  for (size_t k = 0; k < dims.size(); ++k) {
    l.dims[k] = dims[k];
    l.index_strides[k] = index_strides[k];
    l.out_strides[k] = out_strides[k];
  }
  l.axis_size = ds[static_cast<size_t>(axis)];
  return l;
}

/// `index` counted from the end when negative; -1 when out of range.
template <class I>
__device__ int64_t normalized(I index, int64_t size) {
  int64_t i = static_cast<int64_t>(index);
  if (i < 0) i += size;
  return i >= 0 && i < size ? i : -1;
}

/// scatter_combine on the device: a 16-bit pair combined in float and rounded once, as the CPU
/// kernel combines it.
template <class T>
__device__ T combine(T a, T b, ScatterReduction red) {
  if constexpr (cuda_half::is_16bit_v<T>)
    return cuda_half::from_float<T>(
        scatter_combine(cuda_half::to_float(a), cuda_half::to_float(b), red));
  else
    return scatter_combine(a, b, red);
}

/// One thread per line, walking it in increasing order along the axis.
template <class T, class I>
__global__ void scatter_lines_kernel(T* out, const I* indices, const T* updates, ScatterLayout l,
                                     int64_t lines, ScatterReduction red) {
  const int64_t n = l.dims[l.axis];
  const int64_t index_step = l.index_strides[l.axis], out_step = l.out_strides[l.axis];
  for (int64_t line = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; line < lines;
       line += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t rest = line, from = 0, to = 0;
    for (int k = l.rank - 1; k >= 0; --k) {
      if (k == l.axis) continue;
      const int64_t i = rest % l.dims[k];
      rest /= l.dims[k];
      from += i * l.index_strides[k];
      to += i * l.out_strides[k];
    }
    for (int64_t j = 0; j < n; ++j, from += index_step) {
      const int64_t index = normalized(indices[from], l.axis_size);
      if (index < 0) continue;
      T& o = out[to + index * out_step];
      o = combine(o, updates[from], red);
    }
  }
}

/// The output offset each update goes to (`invalid` for an out-of-range index), beside its
/// position.
template <class I>
__global__ void scatter_targets_kernel(const I* indices, ScatterLayout l, int64_t n,
                                       uint64_t invalid, uint64_t* targets, int64_t* positions) {
  for (int64_t p = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; p < n;
       p += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t rest = p, to = 0;
    bool valid = true;
    for (int k = l.rank - 1; k >= 0; --k) {
      int64_t i = rest % l.dims[k];
      rest /= l.dims[k];
      if (k == l.axis) {
        i = normalized(indices[p], l.axis_size);
        valid = i >= 0;
      }
      to += i * l.out_strides[k];
    }
    targets[p] = valid ? static_cast<uint64_t>(to) : invalid;
    positions[p] = p;
  }
}

/// The first thread of each run of equal sorted targets folds the run's updates, in the order
/// of their positions (the sort is stable), into the output element.
template <class T>
__global__ void scatter_sorted_kernel(T* out, const T* updates, const uint64_t* targets,
                                      const int64_t* positions, int64_t n, uint64_t invalid,
                                      ScatterReduction red) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const uint64_t target = targets[i];
    if (target == invalid || (i > 0 && targets[i - 1] == target)) continue;
    T acc = out[target];
    for (int64_t j = i; j < n && targets[j] == target; ++j)
      acc = combine(acc, updates[positions[j]], red);
    out[target] = acc;
  }
}

using ReductionTypes = cuda_ew::TypeList<float, double, Float16, BFloat16, int8_t, int16_t, int32_t,
                                         int64_t, uint8_t, uint16_t, uint32_t, uint64_t, bool>;

class ScatterElementsCuda : public OpKernel {
 public:
  explicit ScatterElementsCuda(const KernelInfo& info)
      : axis_(info.node.attr_int("axis", 0)), reduction_(parse_scatter_reduction(info.node)) {
    if (auto it = info.constant_inputs.find(1); it != info.constant_inputs.end())
      constant_indices_ = it->second;
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& data = ctx.input(0);
    const Tensor& indices = ctx.input(1);
    const Tensor& updates = ctx.input(2);
    const int64_t axis = check_scatter_elements(ctx, data, indices, updates, axis_);
    const Shape& ds = data.shape();
    if (constant_indices_.defined())
      read_indices(constant_indices_, ds[static_cast<size_t>(axis)], ctx, "index");
    Tensor& y = ctx.allocate_output(0, ds, data.dtype());
    if (y.numel() == 0) return;
    const cudaStream_t stream = cuda_ew::stream_of(ctx);
    cuda_check(cudaMemcpyAsync(y.raw_data(), data.raw_data(),
                               static_cast<size_t>(y.numel()) * dtype_size(y.dtype()),
                               cudaMemcpyDeviceToDevice, stream),
               ctx.node().describe(), ": cudaMemcpyAsync");
    if (indices.numel() == 0) return;
    const ScatterLayout l = scatter_layout(ctx, ds, indices.shape(), axis);
    auto run = [&](auto tag) {
      using T = decltype(tag);
      if (indices.dtype() == DType::Int32)
        scatter<T>(ctx, l, y, indices.data<int32_t>(), updates);
      else
        scatter<T>(ctx, l, y, indices.data<int64_t>(), updates);
    };
    if (reduction_ == ScatterReduction::None)
      visit_element_size(dtype_size(data.dtype()), run);
    else
      cuda_ew::dispatch(ReductionTypes{}, data.dtype(), ctx, run);
  }

 private:
  template <class T, class I>
  void scatter(const KernelContext& ctx, const ScatterLayout& l, Tensor& y, const I* indices,
               const Tensor& updates) const {
    const cudaStream_t stream = cuda_ew::stream_of(ctx);
    T* out = static_cast<T*>(y.raw_data());
    const T* upd = static_cast<const T*>(updates.raw_data());
    const int64_t n = updates.numel();
    const int64_t line = l.dims[l.axis];
    const int64_t lines = n / line;
    if (lines >= kManyLines || line <= kShortLine) {
      scatter_lines_kernel<T, I><<<cuda_ew::blocks_for(lines), cuda_ew::kThreads, 0, stream>>>(
          out, indices, upd, l, lines, reduction_);
      cuda_ew::check_launch(ctx);
      return;
    }
    // Targets below y.numel() take bit_width(y.numel()) bits, the invalid marker included.
    const auto invalid = static_cast<uint64_t>(y.numel());
    const int end_bit = std::bit_width(invalid);
    Tensor targets = Tensor::empty({2, n}, DType::UInt64, ctx.device());
    Tensor positions = Tensor::empty({2, n}, DType::Int64, ctx.device());
    uint64_t* t0 = targets.data<uint64_t>();
    int64_t* p0 = positions.data<int64_t>();
    scatter_targets_kernel<I>
        <<<cuda_ew::blocks_for(n), cuda_ew::kThreads, 0, stream>>>(indices, l, n, invalid, t0, p0);
    cuda_ew::check_launch(ctx);
    cub::DoubleBuffer<uint64_t> keys(t0, t0 + n);
    cub::DoubleBuffer<int64_t> values(p0, p0 + n);
    size_t temp_bytes = 0;
    cuda_check(
        cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, keys, values, n, 0, end_bit, stream),
        ctx.node().describe(), ": cub::DeviceRadixSort::SortPairs");
    Tensor temp = Tensor::empty({static_cast<int64_t>(std::max<size_t>(temp_bytes, 1))},
                                DType::UInt8, ctx.device());
    cuda_check(cub::DeviceRadixSort::SortPairs(temp.raw_data(), temp_bytes, keys, values, n, 0,
                                               end_bit, stream),
               ctx.node().describe(), ": cub::DeviceRadixSort::SortPairs");
    scatter_sorted_kernel<T><<<cuda_ew::blocks_for(n), cuda_ew::kThreads, 0, stream>>>(
        out, upd, keys.Current(), values.Current(), n, invalid, reduction_);
    cuda_ew::check_launch(ctx);
  }

  int64_t axis_;
  ScatterReduction reduction_;
  Tensor constant_indices_;  // the plan's host copy of constant indices, else undefined
};

std::unique_ptr<OpKernel> make_scatter_elements(const KernelInfo& info) {
  return std::make_unique<ScatterElementsCuda>(info);
}

DPRUN_CUDA_COMPUTE("ScatterElements", make_scatter_elements);
DPRUN_CUDA_COMPUTE("Scatter", make_scatter_elements);

}  // namespace
}  // namespace dprun
