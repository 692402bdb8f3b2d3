// The node attributes a CUDA kernel definition declines (its `accepts`), so that such nodes run
// on the host: cuDNN's limits (pooling dilations, 4-D convolutions, wide LRN windows) and the
// BatchNormalization forms no CUDA kernel takes; the casts to types the device does not convert.
// Definitions only: every build runs these.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "graph_test_util.h"
#include "op_cases/op_cases.h"

namespace dprun {
namespace {

using testing::floats;
using testing::ints_attr;
using testing::node_with;
using testing::OpCase;
using Attrs = std::map<std::string, Attribute>;

/// The impl of the CUDA kernel built for the node; empty when none is (it runs on the host).
std::string cuda_impl(const Node& node, std::vector<testing::InputSpec> inputs, int64_t opset) {
  const OpCase c{.name = node.op_type, .node = node, .inputs = std::move(inputs), .opset = opset};
  const KernelDef* chosen = nullptr;
  if (!KernelRegistry::instance().create(testing::cuda_kernel_info(c), nullptr, "", &chosen))
    return "";
  return chosen->impl;
}

/// True when a CUDA kernel is built for the node (else it runs on the host).
bool runs_on_cuda(const Node& node, std::vector<testing::InputSpec> inputs, int64_t opset) {
  return !cuda_impl(node, std::move(inputs), opset).empty();
}

TEST(CudaCudnnDeclines, AttributeCombinationsCuDnnCannotRunFallBackToTheHost) {
  const Attrs window = {{"kernel_shape", ints_attr({2, 2})}};
  // MaxPool with its Indices output: only the Y output has a cuDNN counterpart, the rest runs
  // on max_pool_indices.cu, up to 3 spatial dims.
  Node max_pool = node_with("MaxPool", {"x"}, window);
  EXPECT_EQ(cuda_impl(max_pool, {floats({1, 2, 4, 4})}, 12), "cudnn");
  max_pool.outputs = {"y", "indices"};
  EXPECT_EQ(cuda_impl(max_pool, {floats({1, 2, 4, 4})}, 12), "indices");
  Node max_pool_4d = node_with("MaxPool", {"x"}, {{"kernel_shape", ints_attr({2, 2, 2, 2})}});
  max_pool_4d.outputs = max_pool.outputs;
  EXPECT_FALSE(runs_on_cuda(max_pool_4d, {floats({1, 1, 3, 3, 3, 3})}, 12));
  // Pooling with dilations (cuDNN pooling has none).
  Attrs dilated = window;
  dilated["dilations"] = ints_attr({2, 1});
  EXPECT_FALSE(runs_on_cuda(node_with("MaxPool", {"x"}, dilated), {floats({1, 2, 6, 6})}, 12));
  EXPECT_FALSE(runs_on_cuda(node_with("AveragePool", {"x"}, dilated), {floats({1, 2, 6, 6})}, 19));

  // BatchNormalization: inference on cuDNN; training mode (opset 14+ by attribute, before by
  // extra outputs) on batch_norm_training.cu, except per-activation parameters (spatial=0
  // before opset 9) and 16-bit floats.
  const std::vector<testing::InputSpec> bn_inputs = {floats({2, 3, 4}), floats({3}), floats({3}),
                                                     floats({3}), floats({3}, 0.1, 2.0)};
  const std::vector<std::string> bn_in = {"x", "scale", "b", "mean", "var"};
  EXPECT_TRUE(runs_on_cuda(node_with("BatchNormalization", bn_in), bn_inputs, 15));
  Node training = node_with("BatchNormalization", bn_in, {{"training_mode", Attribute::of_int(1)}});
  training.outputs = {"y", "running_mean", "running_var"};
  EXPECT_TRUE(runs_on_cuda(training, bn_inputs, 15));
  Node legacy_training = node_with("BatchNormalization", bn_in);
  legacy_training.outputs = {"y", "mean", "var", "saved_mean", "saved_var"};
  EXPECT_TRUE(runs_on_cuda(legacy_training, bn_inputs, 9));
  Node per_activation = node_with("BatchNormalization", bn_in, {{"spatial", Attribute::of_int(0)}});
  EXPECT_FALSE(runs_on_cuda(per_activation, bn_inputs, 7));
  per_activation.outputs = legacy_training.outputs;
  EXPECT_FALSE(runs_on_cuda(per_activation, bn_inputs, 7));
  std::vector<testing::InputSpec> half_stats = bn_inputs;
  half_stats[3].dtype = half_stats[4].dtype = DType::Float16;
  EXPECT_FALSE(runs_on_cuda(training, half_stats, 15));

  // LRN windows wider than cuDNN's CUDNN_LRN_MAX_N.
  EXPECT_FALSE(runs_on_cuda(node_with("LRN", {"x"}, {{"size", Attribute::of_int(17)}}),
                            {floats({1, 20, 2, 2})}, 13));
  // Conv over 4 spatial dims (cuDNN convolves at most 3).
  EXPECT_FALSE(runs_on_cuda(node_with("Conv", {"x", "w"}),
                            {floats({1, 1, 3, 3, 3, 3}), floats({1, 1, 2, 2, 2, 2})}, 17));

  // Each of these still has a kernel on the host to fall back on.
  for (const Node& n : {max_pool_4d, per_activation}) {
    KernelInfo info{n, 15, DeviceType::CPU, {}, {}};
    EXPECT_NE(KernelRegistry::instance().create(info), nullptr) << n.op_type;
  }
}

TEST(CudaCastDeclines, TargetsTheDeviceDoesNotConvertRunOnTheHost) {
  for (DType to : {DType::String}) {
    SCOPED_TRACE(std::string(dtype_name(to)));
    const OpCase cast{
        .name = "cast",
        .node = node_with("Cast", {"x"}, {{"to", Attribute::of_int(static_cast<int>(to))}}),
        .inputs = {floats({2, 3})},
        .opset = 13};
    EXPECT_EQ(KernelRegistry::instance().create(testing::cuda_kernel_info(cast)), nullptr);
    OpCase like{.name = "cast_like",
                .node = node_with("CastLike", {"x", "like"}),
                .inputs = {floats({2, 3}), {.shape = {1}, .dtype = to}},
                .opset = 15};
    EXPECT_EQ(KernelRegistry::instance().create(testing::cuda_kernel_info(like)), nullptr);
  }
  // Cast-1..5 name the target type by a string: left to the host kernel.
  const OpCase named{.name = "named",
                     .node = node_with("Cast", {"x"}, {{"to", Attribute::of_string("FLOAT16")}}),
                     .inputs = {floats({2, 3})},
                     .opset = 5};
  EXPECT_EQ(KernelRegistry::instance().create(testing::cuda_kernel_info(named)), nullptr);
  // A supported target is taken.
  const OpCase supported{
      .name = "supported",
      .node =
          node_with("Cast", {"x"}, {{"to", Attribute::of_int(static_cast<int>(DType::Float16))}}),
      .inputs = {floats({2, 3})},
      .opset = 13};
  EXPECT_NE(KernelRegistry::instance().create(testing::cuda_kernel_info(supported)), nullptr);
}

}  // namespace
}  // namespace dprun
