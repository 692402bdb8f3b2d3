#pragma once
// The unfused form of the CPU rewrites' fused nodes (ConcatConvNHWC, ConvAddNHWC, ConvChainNHWC,
// NchwConvMaxPoolNHWC): each part of the fused node run by its own kernel, which is both the fused
// node's reference and its fast path's fallback.
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/kernel.h"

namespace dprun {

/// One part of a fused node as a node of its own, run by the kernel the registry picks for it.
class PartKernel {
 public:
  /// A value computed inside the fused node, not one of its inputs.
  static constexpr size_t kInner = SIZE_MAX;

  /// `node`'s kernel of implementation `impl` ("" for the best that accepts it). Its input i is
  /// the fused node's input `sources[i]` (kInner: a value computed inside), whose type and
  /// constant value it is given. An ai.onnx part gets the model's ai.onnx opset, a part of the
  /// fused node's domain the fused node's. Fails naming the fused node when there is none.
  PartKernel(const KernelInfo& fused, Node node, const std::vector<size_t>& sources,
             const std::string& impl)
      : node_(std::make_unique<Node>(std::move(node))) {
    const int64_t opset =
        node_->domain.empty() && fused.graph ? fused.graph->opset("") : fused.opset;
    KernelInfo info{*node_, opset, fused.device_type, {}, {}, fused.graph, {}, fused.plan_options};
    for (size_t i = 0; i < sources.size(); ++i) {
      const size_t s = sources[i];
      info.input_types.push_back(s < fused.input_types.size() ? fused.input_types[s]
                                                              : std::nullopt);
      if (auto it = fused.constant_inputs.find(s); it != fused.constant_inputs.end())
        info.constant_inputs.emplace(i, it->second);
    }
    std::string why;
    kernel_ = KernelRegistry::instance().create(info, &why, impl);
    if (!kernel_) fused.node.fail("no ", node_->op_type, " kernel to run it with: ", why);
  }

  /// Runs the part on `inputs` (nullptr for an omitted one) with `ctx`'s execution resource and
  /// parameters version (so that its packed weights stay cached); returns its output 0.
  Tensor run(KernelContext& ctx, const std::vector<const Tensor*>& inputs) const {
    std::vector<Tensor> outputs(1);
    KernelContext part(*node_, ctx.execution(), inputs, outputs);
    part.set_parameters_version(ctx.parameters_version());
    kernel_->compute(part);
    return std::move(outputs[0]);
  }

  const Node& node() const { return *node_; }

 private:
  std::unique_ptr<Node> node_;  // the kernel refers to it: its address must not change
  std::unique_ptr<OpKernel> kernel_;
};

/// The reference kernel of a fused node: `Unfused`, constructible from (const KernelInfo&,
/// const std::string& impl) with compute(KernelContext&) const, over its parts' reference
/// kernels.
template <class Unfused>
class UnfusedReferenceKernel : public OpKernel {
 public:
  explicit UnfusedReferenceKernel(const KernelInfo& info) : unfused_(info, "reference") {}
  void compute(KernelContext& ctx) const override { unfused_.compute(ctx); }

 private:
  Unfused unfused_;
};

}  // namespace dprun
