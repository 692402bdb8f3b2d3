#include "engine/training/gradient_accumulation.h"

#include "engine/error.h"
#include "engine/training/optimizer_update.h"

namespace dprun {

void add_gradients(const std::vector<Tensor>& sums, const std::vector<Tensor>& more) {
  DPRUN_CHECK(sums.size() == more.size(), "gradient accumulation: ", more.size(),
              " gradients to add to ", sums.size());
  for (size_t i = 0; i < sums.size(); ++i)
    DPRUN_CHECK(sums[i].shape() == more[i].shape() && sums[i].dtype() == more[i].dtype() &&
                    (sums[i].dtype() == DType::Float32 || sums[i].dtype() == DType::Float64),
                "gradient accumulation: gradient ", i, " is ", more[i].describe(),
                " but the sum so far is ", sums[i].describe());
  UpdateKernelCache<GradientAddKernel> kernels(kAddGradientOp);
  for_each_memory(
      sums, {&more},
      [&](Device memory, ExecutionContext* execution, const std::vector<size_t>& indices) {
        for (size_t i : indices) {
          Tensor sum = sums[i];  // a handle on the caller's storage
          const Tensor& addend = more[i];
          // Host memory is shared by every CPU device; elsewhere the addend must be on sum's
          // device.
          const bool readable =
              addend.device() == sum.device() ||
              (memory.type == DeviceType::CPU && addend.device().type == DeviceType::CPU);
          kernels.get(memory.type, sum.dtype())
              .add(execution, sum, readable ? addend : addend.to(sum.device()));
        }
      });
}

}  // namespace dprun
