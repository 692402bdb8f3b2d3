// DataParallel's scatter and gather on accelerators, as on CPU devices (data_parallel_test.cpp):
// a split along an inner dim gathered back along it, 0-d outputs gathered into a vector of one
// element per replica, and outputs gathered onto the host. Runs on the simulated devices
// everywhere and on CUDA GPUs where present.
#include <gtest/gtest.h>

#include "accelerator_test_util.h"
#include "engine/parallel/data_parallel.h"
#include "engine/warning.h"
#include "graph_test_util.h"

namespace dprun {
namespace {

using AcceleratorScatterGather = testing::AcceleratorTest;

// x [2, W] -> columns = ReduceSum(x, axes [-1], keepdims) [2, 1] and total = ReduceSum(x) (0-d).
std::shared_ptr<Graph> sums_graph() {
  using testing::make_node;
  Node columns = make_node("ReduceSum", {"x", "last"}, {"columns"});
  columns.attributes["keepdims"] = Attribute::of_int(1);
  Node total = make_node("ReduceSum", {"x"}, {"total"});
  total.attributes["keepdims"] = Attribute::of_int(0);
  auto g = testing::make_graph({columns, total}, {{"x", DType::Float32}}, {"columns", "total"});
  g->opset_imports[""] = 17;
  g->initializers["last"] = Tensor::from_vector<int64_t>({1}, {-1});
  return g;
}

Tensor iota(Shape shape) {
  Tensor t = Tensor::empty(shape, DType::Float32);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = static_cast<float>(i);
  return t;
}

DataParallelOptions on_two(const std::vector<Device>& devices) {
  DataParallelOptions options;
  options.device_ids = {devices[0], devices[1]};
  return options;
}

TEST_P(AcceleratorScatterGather, DimOneSplitsColumnsAndGathersThemBack) {
  if (devices().size() < 2) GTEST_SKIP() << "needs two devices";
  DataParallelOptions options = on_two(devices());
  options.dim = 1;
  DataParallel dp(std::make_shared<Model>(sums_graph(), device()), options);
  // x = [[0 1 2 3 4], [5 6 7 8 9]]: torch.chunk gives columns 0..2 and 3..4; each replica sums
  // its own, and the [2, 1] results are joined along dim 1 (the 0-d totals into a vector, with
  // a warning tested on CPU devices).
  auto previous = set_warning_handler([](const std::string&) {});
  const std::vector<Tensor> out = dp.forward({iota({2, 5})});
  set_warning_handler(previous);
  EXPECT_EQ(dp.last_run().chunk_rows, (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(out[0].device(), device());
  testing::expect_values(out[0].to(Device::cpu()), {2, 2}, {0 + 1 + 2, 3 + 4, 5 + 6 + 7, 8 + 9});
}

TEST_P(AcceleratorScatterGather, ScalarOutputsAreGatheredIntoAVectorOnTheHostWhenAsked) {
  if (devices().size() < 2) GTEST_SKIP() << "needs two devices";
  DataParallelOptions options = on_two(devices());
  options.output_device = Device::cpu();
  DataParallel dp(std::make_shared<Model>(sums_graph(), device()), options);
  auto previous = set_warning_handler([](const std::string&) {});
  const std::vector<Tensor> out = dp.forward({iota({4, 2})});
  set_warning_handler(previous);
  EXPECT_EQ(out[0].device(), Device::cpu());
  EXPECT_EQ(out[1].device(), Device::cpu());
  testing::expect_values(out[0], {4, 1}, {1, 5, 9, 13});
  // Rows 0-1 sum to 0+1+2+3, rows 2-3 to 4+5+6+7: one element per replica.
  testing::expect_values(out[1], {2}, {6, 22});
}

DPRUN_ON_ACCELERATORS(AcceleratorScatterGather);

}  // namespace
}  // namespace dprun
