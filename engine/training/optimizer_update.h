#pragma once
// The per-tensor updates of the optimizers (optimizer.h), the loss scaler (grad_scaler.h),
// gradient clipping (clip_grad_norm.h) and gradient accumulation (Trainer), as kernels of
// dprun's private domain "ai.dprun": ops SgdUpdate, AdamUpdate, ScaleGradient, GradientNorm and
// AddGradient, each with a CPU definition
// (ops/training/optimizer_update.cpp) and a CUDA one (ops/training/optimizer_update.cu), the
// optimizers' running the element updates of ops/math/optimizer_functors.h.
//
// Why registry kernels rather than a Backend hook: the update math is written once as
// host/device functors in ops/, which engine/ never includes (backends included); the kernel
// registry is how engine code reaches code in ops/, keyed by device type and dtype like any
// op, and a test can check that every update has both definitions. The optimizer looks its
// kernels up once, when it is made, and calls update() on them directly with element ranges:
// no graph, plan or KernelContext per call, so the CPU loops cost what they did, and the
// fused Trainer step can still update disjoint ranges from several worker threads at once.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "engine/error.h"
#include "engine/execution_context.h"
#include "engine/kernel.h"
#include "engine/tensor.h"

namespace dprun {

/// The domain of dprun's own ops.
inline constexpr char kDprunDomain[] = "ai.dprun";
inline constexpr char kSgdUpdateOp[] = "SgdUpdate";
inline constexpr char kAdamUpdateOp[] = "AdamUpdate";
inline constexpr char kScaleGradientOp[] = "ScaleGradient";
inline constexpr char kGradientNormOp[] = "GradientNorm";
inline constexpr char kAddGradientOp[] = "AddGradient";

struct SgdOptions {
  double lr = 0.01;
  double momentum = 0;
  double dampening = 0;
  double weight_decay = 0;  // L2: added to the gradient
  bool nesterov = false;
};

struct AdamOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  /// Adam: L2 added to the gradient. AdamW: decoupled decay (torch's default there is 0.01).
  double weight_decay = 0;
  bool decoupled_weight_decay = false;
};

/// An optimizer's update of one tensor, in place. Not an op for graphs: the factories
/// (make_update_kernel) decline a node that sits in a graph, so a model that names one fails
/// at load, and compute() fails.
class ParameterUpdateKernel : public OpKernel {
 public:
  void compute(KernelContext& ctx) const final;
};

/// Arguments common to both updates: elements [begin, end) of `parameter` are updated in
/// place from `gradient` (same device, shape and dtype), with the optimizer's state tensors
/// (same device, shape and dtype). `execution`: on a GPU the context whose stream the update is
/// queued on (required; the caller synchronizes it); on the CPU unused (may be null), the update
/// runs on the calling thread and is done when it returns. Disjoint ranges of one tensor may be
/// updated concurrently on the CPU.
class SgdUpdateKernel : public ParameterUpdateKernel {
 public:
  /// torch.optim.SGD; `momentum_buffer` is undefined without momentum. `first`: the
  /// optimizer's first step (the buffer starts as the gradient).
  virtual void update(ExecutionContext* execution, const SgdOptions& options, bool first,
                      Tensor& parameter, const Tensor& gradient, Tensor& momentum_buffer,
                      int64_t begin, int64_t end) const = 0;
};

class AdamUpdateKernel : public ParameterUpdateKernel {
 public:
  /// torch.optim.Adam or AdamW at step `step` (1 for the first).
  virtual void update(ExecutionContext* execution, const AdamOptions& options, int64_t step,
                      Tensor& parameter, const Tensor& gradient, Tensor& exp_avg,
                      Tensor& exp_avg_sq, int64_t begin, int64_t end) const = 0;
};

/// Every element of `gradient` (float32 or float64) multiplied in place by `factor` rounded to
/// the gradient's dtype, and `found_inf` (one float32 element on the gradient's device) set to 1
/// when any element was infinite or NaN before; it is never reset, so one flag serves a device's
/// tensors.
/// The loss scaler's unscale (torch's _amp_foreach_non_finite_check_and_unscale_) and gradient
/// clipping's multiply. `execution` as for the updates above.
class GradientScaleKernel : public ParameterUpdateKernel {
 public:
  virtual void scale(ExecutionContext* execution, double factor, Tensor& gradient,
                     Tensor& found_inf) const = 0;
};

/// A gradient's norm for clip_grad_norm: the sum of its squared elements (`infinity` false) or
/// the largest absolute value (true; NaN when an element is NaN), computed in double and written
/// into element `slot` of `out` (float64, on the gradient's device). Deterministic: the same
/// tensor gives the same bits on every run. `execution` as for the updates above.
class GradientNormKernel : public ParameterUpdateKernel {
 public:
  virtual void norm(ExecutionContext* execution, const Tensor& gradient, bool infinity, Tensor& out,
                    int64_t slot) const = 0;
};

/// sum += more, elementwise, in place (same shape, dtype float32 or float64, and device): a
/// batch's gradients added to those accumulated so far. `execution` as for the updates above.
class GradientAddKernel : public ParameterUpdateKernel {
 public:
  virtual void add(ExecutionContext* execution, Tensor& sum, const Tensor& more) const = 0;
};

/// The factory of an update kernel: K, or nullptr for a node inside a graph.
template <class K>
std::unique_ptr<OpKernel> make_update_kernel(const KernelInfo& info) {
  if (info.graph != nullptr) return nullptr;
  return std::make_unique<K>();
}

/// The registered update kernel `op_type` (kSgdUpdateOp, kAdamUpdateOp, kScaleGradientOp,
/// kGradientNormOp, kAddGradientOp) for tensors of `dtype` on devices of `device`; throws Error
/// when this build has none ("optimizer: no SgdUpdate kernel for float16 on cpu (no kernel for
/// dtype float16)").
std::unique_ptr<OpKernel> create_update_kernel(const char* op_type, DeviceType device, DType dtype);

/// create_update_kernel as a K (SgdUpdateKernel, AdamUpdateKernel, GradientScaleKernel,
/// GradientNormKernel, GradientAddKernel); throws Error when the registered kernel is not one.
template <class K>
std::unique_ptr<K> create_update_kernel_as(const char* op_type, DeviceType device, DType dtype) {
  std::unique_ptr<OpKernel> kernel = create_update_kernel(op_type, device, dtype);
  auto* typed = dynamic_cast<K*>(kernel.get());
  DPRUN_CHECK(typed != nullptr, "the ", op_type, " kernel for ", device_type_name(device),
              " is not an update kernel of that op");
  kernel.release();
  return std::unique_ptr<K>(typed);
}

/// The kernels of one update op, each looked up on first use of its (device type, dtype).
template <class K>
class UpdateKernelCache {
 public:
  explicit UpdateKernelCache(const char* op_type) : op_type_(op_type) {}
  const K& get(DeviceType device, DType dtype) {
    std::unique_ptr<K>& kernel = kernels_[{device, dtype}];
    if (!kernel) kernel = create_update_kernel_as<K>(op_type_, device, dtype);
    return *kernel;
  }

 private:
  const char* op_type_;
  std::map<std::pair<DeviceType, DType>, std::unique_ptr<K>> kernels_;
};

/// Runs fn(memory, execution, indices) once for each memory holding some of `tensors`: the host
/// (the tensors on CPU devices; `execution` null), then each accelerator in device order (a fresh
/// execution context of that device). `indices` are the positions in `tensors` of the tensors in
/// that memory; `with` holds lists aligned with `tensors` (the gradients, the addends, an
/// optimizer's state) whose entries at those positions fn reads or writes too. On an
/// accelerator the context's stream first waits for the ready events of all of them, and what
/// fn queued hands them on with one event (engine/stream_order.h): the host does not wait for
/// it. A fn that reads a result on the host synchronizes `execution` first.
void for_each_memory(
    const std::vector<Tensor>& tensors, const std::vector<const std::vector<Tensor>*>& with,
    const std::function<void(Device, ExecutionContext*, const std::vector<size_t>&)>& fn);

/// Multiplies every gradient in place by `factor` (GradientScaleKernel, on the device that
/// holds it, kernels from `kernels`: a cache of kScaleGradientOp) and returns whether every
/// element was finite before: the loss scaler's unscale and check, and clipping's multiply.
bool scale_gradients(const std::vector<Tensor>& gradients, double factor,
                     UpdateKernelCache<GradientScaleKernel>& kernels);

}  // namespace dprun
