#include "engine/parallel/comm.h"

#include "engine/dtype.h"

namespace dprun {

namespace {

template <class T>
void add_into(T* sum, const T* part, int64_t n) {
  for (int64_t i = 0; i < n; ++i) sum[i] += part[i];
}

}  // namespace

Tensor reduce_add(const std::vector<Tensor>& inputs, Device destination) {
  DPRUN_CHECK(!inputs.empty(), "reduce_add: no tensors given");
  const Tensor& first = inputs[0];
  DPRUN_CHECK(first.dtype() == DType::Float32 || first.dtype() == DType::Float64,
              "reduce_add: only float32 and float64 tensors can be summed, not ", first.describe());
  for (size_t i = 1; i < inputs.size(); ++i)
    DPRUN_CHECK(inputs[i].shape() == first.shape() && inputs[i].dtype() == first.dtype(),
                "reduce_add: tensor ", i, " is ", inputs[i].describe(), " but tensor 0 is ",
                first.describe());
  // CPU devices share host memory, so the parts are read where they are.
  DPRUN_CHECK(destination.type == DeviceType::CPU, "reduce_add onto ", destination.to_string(),
              " is not supported: this build sums on CPU devices only");
  Tensor sum = first.to(destination, true);
  for (size_t i = 1; i < inputs.size(); ++i) {
    Tensor part =
        inputs[i].device().type == DeviceType::CPU ? inputs[i] : inputs[i].to(destination);
    if (sum.dtype() == DType::Float64)
      add_into(sum.data<double>(), part.data<double>(), sum.numel());
    else
      add_into(sum.data<float>(), part.data<float>(), sum.numel());
  }
  return sum.to(destination);
}

}  // namespace dprun
