// The kernels of the simulated devices: one definition for each of the CUDA backend's, with
// its op, versions, dtypes and host inputs, accepting the nodes the CUDA kernel accepts, and
// computing with the op's CPU kernel (the optimizers' update kernels: sim_update_kernels.h).
// A plan for sim:N therefore places every node where a plan for cuda:N would (device, host
// fallback or shape arithmetic), and what it hands each kernel is checked: an input a CUDA
// kernel would read from device memory must be in the simulated device's memory. In a build
// without CUDA there are no definitions to follow, and every node of a sim plan runs on the
// host.
#include <algorithm>
#include <map>
#include <mutex>
#include <utility>

#include "engine/backends/sim/sim_memory.h"
#include "engine/error.h"
#include "engine/kernel.h"
#include "engine/stream_order.h"
#include "ops/training/optimizer_update_sim.h"

namespace dprun {

namespace {

class SimKernel final : public OpKernel {
 public:
  SimKernel(std::unique_ptr<OpKernel> host_kernel, std::vector<int> host_inputs,
            std::vector<int> metadata_inputs)
      : host_kernel_(std::move(host_kernel)),
        host_inputs_(std::move(host_inputs)),
        metadata_(std::move(metadata_inputs)) {}

  void compute(KernelContext& ctx) const override {
    const Device device = ctx.device();
    if (ctx.input_count() == 0) return compute_once_per_device(ctx);
    check_inputs(ctx, device);
    {
      // The kernel's operands are open to it, and the outputs it allocates; nothing else is.
      std::vector<const Tensor*> operands;
      for (size_t i = 0; i < ctx.input_count(); ++i) operands.push_back(ctx.optional_input(i));
      SimAccess access(device, data_on(device, operands));
      SimInPlaceReads in_place(device, data_on(device, read_on_device(ctx)));
      SimWork work(device, ctx.node().op_type + " kernel ('" + ctx.node().name + "')");
      std::vector<uintptr_t> inputs_memory = book_reads(ctx, work);
      host_kernel_->compute(ctx);
      book_writes(ctx, work, inputs_memory);
    }
    move_outputs_to(ctx, device);
  }

 private:
  // A device kernel's outputs are in its device's memory, whatever the CPU kernel made.
  static void move_outputs_to(KernelContext& ctx, Device device) {
    for (size_t o = 0; o < ctx.output_count(); ++o) {
      const Tensor& out = ctx.output(o);
      if (out.defined() && out.dtype() != DType::String && out.device() != device)
        ctx.set_output(o, out.to(device));
    }
  }

  // A kernel without inputs (Constant, whose value the plan fixed) computes its outputs on the
  // first run on each device, which waits for them, and returns them on every later run, whose
  // stream's use it records with the allocator: what CUDA's Constant kernel does
  // (ops/array/constant_cuda.cpp).
  void compute_once_per_device(KernelContext& ctx) const {
    const Device device = ctx.device();
    std::lock_guard lock(mutex_);
    auto it = outputs_.find(device.index);
    if (it == outputs_.end()) {
      {
        SimWork work(device, ctx.node().op_type + " kernel ('" + ctx.node().name + "')");
        host_kernel_->compute(ctx);
        move_outputs_to(ctx, device);
        book_writes(ctx, work, {});
      }
      ctx.execution().synchronize();
      std::vector<Tensor> made;
      for (size_t o = 0; o < ctx.output_count(); ++o) made.push_back(ctx.output(o));
      it = outputs_.emplace(device.index, std::move(made)).first;
    }
    for (size_t o = 0; o < it->second.size(); ++o) {
      use_on_stream(it->second[o], device, StreamWait::Handover);
      ctx.set_output(o, it->second[o]);
    }
  }

  // Books the reads of the inputs the kernel reads on the device (not those of which it reads
  // only the shape); returns the mappings they are in.
  std::vector<uintptr_t> book_reads(const KernelContext& ctx, SimWork& work) const {
    std::vector<uintptr_t> mappings;
    auto memory = sim_memory(ctx.device());
    for (size_t i = 0; i < ctx.input_count(); ++i) {
      const Tensor* t = ctx.optional_input(i);
      if (t == nullptr || !t->defined() || t->device() != ctx.device() || is_metadata(i)) continue;
      work.reads(ctx.device(), t->raw_data());
      mappings.push_back(memory->mapping_of(t->raw_data()));
    }
    return mappings;
  }

  // Books the writes of the outputs in device memory, except views of an input (a reshape
  // writes nothing).
  static void book_writes(KernelContext& ctx, SimWork& work,
                          const std::vector<uintptr_t>& inputs_memory) {
    auto memory = sim_memory(ctx.device());
    for (size_t o = 0; o < ctx.output_count(); ++o) {
      const Tensor& out = ctx.output(o);
      if (!out.defined() || out.device() != ctx.device() || out.dtype() == DType::String) continue;
      const uintptr_t mapping = memory->mapping_of(out.raw_data());
      if (std::count(inputs_memory.begin(), inputs_memory.end(), mapping) == 0)
        work.writes(ctx.device(), out.raw_data());
    }
  }

  // The inputs the CUDA kernel reads in device memory: all but those it reads on the host or
  // only the dims of.
  std::vector<const Tensor*> read_on_device(const KernelContext& ctx) const {
    std::vector<const Tensor*> out;
    for (size_t i = 0; i < ctx.input_count(); ++i)
      if (!is_metadata(i) &&
          std::count(host_inputs_.begin(), host_inputs_.end(), static_cast<int>(i)) == 0)
        out.push_back(ctx.optional_input(i));
    return out;
  }

  bool is_metadata(size_t i) const {
    return std::count(metadata_.begin(), metadata_.end(), static_cast<int>(i)) != 0;
  }

  void check_inputs(const KernelContext& ctx, Device device) const {
    for (size_t i = 0; i < ctx.input_count(); ++i) {
      const Tensor* t = ctx.optional_input(i);
      if (t == nullptr || t->dtype() == DType::String || t->device() == device || is_metadata(i) ||
          std::count(host_inputs_.begin(), host_inputs_.end(), static_cast<int>(i)))
        continue;
      fail("input ", i, " ('", ctx.node().inputs[i], "') is on ", t->device().to_string(),
           ", not on ", device.to_string(), ": a device kernel reads its inputs from its ",
           "device's memory");
    }
  }

  std::unique_ptr<OpKernel> host_kernel_;
  std::vector<int> host_inputs_;  // KernelDef::host_inputs: read wherever they are
  std::vector<int> metadata_;     // KernelDef::metadata_inputs: only their dims are read
  mutable std::mutex mutex_;
  // By device index: the outputs of a kernel without inputs.
  mutable std::map<int, std::vector<Tensor>> outputs_;
};

// The simulated device's definition following `cuda`: its CPU kernel, checked and wrapped.
KernelDef follow(const KernelDef& cuda) {
  KernelDef def = cuda;
  def.device = DeviceType::Sim;
  // Where the CUDA definition declines the node (an attribute or dtype it does not cover), so
  // does this one, and the node falls back to the host as on a GPU.
  if (cuda.accepts)
    def.accepts = [accepts = cuda.accepts](const KernelInfo& info) {
      KernelInfo as_cuda = info;
      as_cuda.device_type = DeviceType::CUDA;
      return accepts(as_cuda);
    };
  def.factory = [host_inputs = cuda.host_inputs, metadata_inputs = cuda.metadata_inputs](
                    const KernelInfo& info) -> std::unique_ptr<OpKernel> {
    KernelInfo on_host = info;
    on_host.device_type = DeviceType::CPU;
    std::unique_ptr<OpKernel> kernel = KernelRegistry::instance().create(on_host);
    if (!kernel) return nullptr;
    if (std::unique_ptr<OpKernel> update = sim_update_kernel(kernel)) return update;
    return std::make_unique<SimKernel>(std::move(kernel), host_inputs, metadata_inputs);
  };
  return def;
}

[[maybe_unused]] const bool following_cuda = [] {
  KernelRegistry::instance().on_add([](const KernelDef& def) {
    if (def.device == DeviceType::CUDA) KernelRegistry::instance().add(follow(def));
  });
  return true;
}();

}  // namespace

}  // namespace dprun
