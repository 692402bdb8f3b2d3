// scatter / gather / chunk sizes against hand-computed splits (torch.chunk's rule).
#include <gtest/gtest.h>

#include "engine/parallel/gather.h"
#include "engine/parallel/scatter.h"
#include "engine/warning.h"

namespace dprun {
namespace {

std::vector<Device> cpus(int n) {
  std::vector<Device> d;
  for (int i = 0; i < n; ++i) d.push_back(Device::cpu(i));
  return d;
}

Tensor iota(Shape shape) {
  Tensor t = Tensor::empty(shape, DType::Float32);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = static_cast<float>(i);
  return t;
}

TEST(ChunkSizes, TorchChunkRule) {
  EXPECT_EQ(compute_chunk_sizes(5, 4, SplitPolicy::Chunk), (std::vector<int64_t>{2, 2, 1}));
  EXPECT_EQ(compute_chunk_sizes(10, 4, SplitPolicy::Chunk), (std::vector<int64_t>{3, 3, 3, 1}));
  EXPECT_EQ(compute_chunk_sizes(8, 4, SplitPolicy::Chunk), (std::vector<int64_t>{2, 2, 2, 2}));
  EXPECT_EQ(compute_chunk_sizes(3, 8, SplitPolicy::Chunk), (std::vector<int64_t>{1, 1, 1}));
}

TEST(ChunkSizes, EvenUsesEveryDevice) {
  EXPECT_EQ(compute_chunk_sizes(5, 4, SplitPolicy::Even), (std::vector<int64_t>{2, 1, 1, 1}));
  EXPECT_EQ(compute_chunk_sizes(10, 4, SplitPolicy::Even), (std::vector<int64_t>{3, 3, 2, 2}));
  EXPECT_EQ(compute_chunk_sizes(2, 4, SplitPolicy::Even), (std::vector<int64_t>{1, 1, 0, 0}));
}

TEST(ChunkSizes, WeightedIsProportionalAndSumsToN) {
  EXPECT_EQ(compute_chunk_sizes(12, 2, SplitPolicy::Weighted, {1, 2}),
            (std::vector<int64_t>{4, 8}));
  EXPECT_EQ(compute_chunk_sizes(10, 3, SplitPolicy::Weighted, {1, 1, 1}),
            (std::vector<int64_t>{4, 3, 3}));
  EXPECT_EQ(compute_chunk_sizes(7, 2, SplitPolicy::Weighted, {3, 1}), (std::vector<int64_t>{5, 2}));
  EXPECT_THROW(compute_chunk_sizes(7, 2, SplitPolicy::Weighted, {1}), Error);
  EXPECT_THROW(compute_chunk_sizes(7, 2, SplitPolicy::Weighted, {1, -1}), Error);
}

TEST(Scatter, FiveRowsOnFourDevicesRunThreeReplicas) {
  ScatterResult r = scatter({iota({5, 2})}, cpus(4), {.dim = 0});
  EXPECT_EQ(r.devices, (std::vector<Device>{Device::cpu(0), Device::cpu(1), Device::cpu(2)}));
  EXPECT_EQ(r.rows, (std::vector<int64_t>{2, 2, 1}));
  EXPECT_EQ(r.inputs[2][0].shape(), (Shape{1, 2}));
  EXPECT_EQ(r.inputs[2][0].data<float>()[0], 8.0f);
  EXPECT_EQ(r.inputs[1][0].device(), Device::cpu(1));
}

TEST(Scatter, ContiguousChunksForCpuDevicesAreViewsOfTheInput) {
  Tensor input = iota({5, 2});
  ScatterResult r = scatter({input}, cpus(3), {.dim = 0});
  ASSERT_EQ(r.inputs.size(), 3u);
  const auto* base = static_cast<const float*>(input.raw_data());
  for (size_t c = 0; c < 3; ++c) {
    SCOPED_TRACE(c);
    EXPECT_EQ(r.inputs[c][0].device(), Device::cpu(static_cast<int>(c)));
    EXPECT_EQ(r.inputs[c][0].raw_data(), base + 4 * c);  // rows 0-1, 2-3, 4: no copy
    EXPECT_FALSE(r.inputs[c][0].is_sole_owner());
  }
  // Columns are not contiguous: a copy, on the device it is for.
  ScatterResult columns = scatter({input}, cpus(2), {.dim = 1});
  EXPECT_NE(columns.inputs[1][0].raw_data(), base + 1);
  EXPECT_EQ(columns.inputs[1][0].device(), Device::cpu(1));
  EXPECT_EQ(columns.inputs[1][0].data<float>()[0], 1.0f);
}

TEST(Scatter, NegativeAndInnerDims) {
  ScatterResult r = scatter({iota({2, 6})}, cpus(2), {.dim = -1});
  ASSERT_EQ(r.inputs.size(), 2u);
  EXPECT_EQ(r.inputs[1][0].shape(), (Shape{2, 3}));
  // Row 1, columns 3..5 of the original: 9, 10, 11.
  EXPECT_EQ(r.inputs[1][0].data<float>()[3], 9.0f);
}

TEST(Scatter, ExplicitChunkSizes) {
  ScatterResult r = scatter({iota({6, 1})}, cpus(3), {.chunk_sizes = {1, 0, 5}});
  EXPECT_EQ(r.devices, (std::vector<Device>{Device::cpu(0), Device::cpu(2)}));
  EXPECT_EQ(r.rows, (std::vector<int64_t>{1, 5}));
  EXPECT_THROW(scatter({iota({6, 1})}, cpus(3), {.chunk_sizes = {1, 5}}), Error);     // wrong count
  EXPECT_THROW(scatter({iota({6, 1})}, cpus(3), {.chunk_sizes = {1, 1, 1}}), Error);  // wrong sum
}

TEST(Scatter, MismatchedBatchSizesAreAnErrorNamingTheInputs) {
  try {
    scatter({iota({4, 2}), iota({3, 2})}, cpus(2), {.names = {"ids", "mask"}});
    FAIL() << "no error";
  } catch (const Error& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("'ids' has 4"), std::string::npos) << what;
    EXPECT_NE(what.find("'mask' has 3"), std::string::npos) << what;
  }
}

TEST(Scatter, BroadcastInputsAndScalarsGoWholeToEveryDevice) {
  ScatterResult r = scatter({iota({4, 2}), iota({3}), Tensor::scalar<float>(7)}, cpus(2),
                            {.splits = {InputSplit{}, InputSplit::whole(), InputSplit{}}});
  ASSERT_EQ(r.inputs.size(), 2u);
  for (const auto& chunk : r.inputs) {
    EXPECT_EQ(chunk[1].shape(), (Shape{3}));
    EXPECT_EQ(chunk[2].rank(), 0);
  }
  EXPECT_EQ(r.inputs[1][1].device(), Device::cpu(1));
}

TEST(Scatter, PerInputDims) {
  ScatterResult r = scatter({iota({4, 2}), iota({2, 4})}, cpus(2),
                            {.splits = {InputSplit{}, InputSplit::along(1)}});
  EXPECT_EQ(r.inputs[0][1].shape(), (Shape{2, 2}));
}

TEST(Gather, ConcatenatesAlongDim) {
  std::vector<std::vector<Tensor>> outs = {{iota({2, 3})}, {iota({1, 3})}};
  auto g = gather(outs, Device::cpu(0), 0);
  EXPECT_EQ(g[0].shape(), (Shape{3, 3}));
  EXPECT_EQ(g[0].data<float>()[6], 0.0f);
  auto h = gather({{iota({2, 1})}, {iota({2, 2})}}, Device::cpu(1), -1);
  EXPECT_EQ(h[0].shape(), (Shape{2, 3}));
  EXPECT_EQ(h[0].device(), Device::cpu(1));
}

TEST(Gather, MismatchOutsideDimIsAnError) {
  EXPECT_THROW(gather({{iota({2, 3})}, {iota({2, 4})}}, Device::cpu(0), 0), Error);
}

TEST(Gather, ScalarsBecomeAVectorWithOneWarning) {
  std::vector<std::string> warnings;
  auto previous = set_warning_handler([&](const std::string& m) { warnings.push_back(m); });
  reset_warn_once();  // an earlier test in this process may have given the warning already
  auto g =
      gather({{Tensor::scalar<float>(1)}, {Tensor::scalar<float>(2)}, {Tensor::scalar<float>(3)}},
             Device::cpu(0), 0);
  gather({{Tensor::scalar<float>(1)}, {Tensor::scalar<float>(2)}}, Device::cpu(0), 0);
  set_warning_handler(previous);
  EXPECT_EQ(g[0].shape(), (Shape{3}));
  EXPECT_EQ(g[0].data<float>()[2], 3.0f);
  EXPECT_EQ(warnings, (std::vector<std::string>{
                          "was asked to gather along dimension 0, but all input tensors were "
                          "scalars; will instead unsqueeze and return a vector"}));
}

TEST(Warnings, WarnOnceGivesEachKeyOnceUntilReset) {
  std::vector<std::string> warnings;
  auto previous = set_warning_handler([&](const std::string& m) { warnings.push_back(m); });
  reset_warn_once();
  warn_once("test.a", "first a");
  warn_once("test.a", "second a");
  warn_once("test.b", "first b");
  reset_warn_once();
  warn_once("test.a", "third a");
  set_warning_handler(previous);
  EXPECT_EQ(warnings, (std::vector<std::string>{"first a", "first b", "third a"}));
}

}  // namespace
}  // namespace dprun
