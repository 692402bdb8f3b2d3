// Executor behaviour: intermediates released after their last use, repeated runs with other
// batch sizes, input checks, thread counts.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>

#include "engine/backends/cpu/cpu_backend.h"
#include "engine/model.h"

namespace dprun {
namespace {

// x -> Relu -> Neg -> Relu -> Neg ... (`length` nodes), float32[batch, width].
std::shared_ptr<Graph> chain(int length, int64_t width) {
  auto g = std::make_shared<Graph>();
  g->opset_imports[""] = 17;
  g->inputs.push_back(
      {"x", {DType::Float32, SymbolicShape{Dim::named("batch"), Dim::known(width)}}});
  std::string prev = "x";
  for (int i = 0; i < length; ++i) {
    Node n;
    n.name = "n" + std::to_string(i);
    n.op_type = i % 2 ? "Neg" : "Relu";
    n.inputs = {prev};
    n.outputs = {"v" + std::to_string(i)};
    prev = n.outputs[0];
    g->nodes.push_back(n);
  }
  g->outputs.push_back({prev, {DType::Float32, std::nullopt}});
  return g;
}

Tensor ramp(int64_t rows, int64_t width) {
  Tensor t = Tensor::empty({rows, width}, DType::Float32);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = static_cast<float>(i % 17) - 8.0f;
  return t;
}

TEST(Executor, IntermediatesAreReleasedAfterTheirLastUse) {
  // 20 nodes over a 4 MB tensor: keeping every intermediate would need 80 MB.
  const int64_t rows = 1024, width = 1024;
  Device device = Device::cpu(7);  // its own arena, so the figures are this test's alone
  Model model(chain(20, width), device);
  auto allocator =
      std::dynamic_pointer_cast<CachingHostAllocator>(CpuBackend::instance().allocator(device));
  ASSERT_NE(allocator, nullptr);
  Tensor x = ramp(rows, width).to(device);
  auto out = model.run({x});
  size_t tensor_bytes = static_cast<size_t>(rows * width) * sizeof(float);
  EXPECT_LE(allocator->stats().peak_in_use, 4 * tensor_bytes) << allocator->stats().peak_in_use;
  // Once warm, further runs reuse the cached blocks instead of growing the arena.
  out = model.run({x});
  size_t footprint = allocator->stats().cached + allocator->stats().in_use;
  for (int i = 0; i < 3; ++i) out = model.run({x});
  EXPECT_EQ(allocator->stats().cached + allocator->stats().in_use, footprint);
}

TEST(CachingHostAllocator, SizeClassesAreWholeAlignmentsWithAQuarterOfWasteAtMost) {
  // aligned_alloc takes sizes that are multiples of the alignment (64) only.
  EXPECT_EQ(CachingHostAllocator::size_class(1), 64u);
  EXPECT_EQ(CachingHostAllocator::size_class(65), 128u);
  EXPECT_EQ(CachingHostAllocator::size_class(80), 128u);
  EXPECT_EQ(CachingHostAllocator::size_class(257), 320u);
  EXPECT_EQ(CachingHostAllocator::size_class(4097), 5120u);
  for (size_t bytes = 1; bytes < (size_t{1} << 22); bytes = bytes * 5 / 4 + 1) {
    const size_t cls = CachingHostAllocator::size_class(bytes);
    ASSERT_EQ(cls % 64, 0u) << bytes;
    ASSERT_GE(cls, bytes);
    if (bytes > 256) {
      ASSERT_LE(cls, bytes + bytes / 4) << bytes;
    }
  }
}

TEST(Executor, RepeatedRunsWithOtherBatchSizes) {
  Model model(chain(3, 4), Device::cpu());  // Relu, Neg, Relu: always 0
  Model two(chain(2, 4), Device::cpu());    // Relu, Neg: -relu(x)
  for (int64_t batch : {1, 7, 3, 64, 2}) {
    Tensor x = ramp(batch, 4);
    auto zero = model.run({x});
    auto neg = two.run({x});
    ASSERT_EQ(neg[0].shape(), (Shape{batch, 4}));
    for (int64_t i = 0; i < x.numel(); ++i) {
      EXPECT_EQ(zero[0].data<float>()[i], 0.0f);
      EXPECT_EQ(neg[0].data<float>()[i], -std::max(0.0f, x.data<float>()[i]));
    }
  }
}

TEST(Executor, InputsAreCheckedAgainstTheDeclaredType) {
  Model model(chain(1, 4), Device::cpu());
  try {
    model.run({ramp(2, 5)});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "input 'x' expects shape [batch, 4] but got [2, 5]");
  }
  try {
    model.run({Tensor::zeros({2, 4}, DType::Float64)});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "input 'x' expects dtype float32 but got float64");
  }
  EXPECT_THROW(model.run(std::vector<Tensor>{}), Error);
  EXPECT_THROW(model.run(std::map<std::string, Tensor>{{"y", ramp(1, 4)}}), Error);
}

TEST(Executor, ThreadCountDoesNotChangeResults) {
  Model model(chain(4, 256), Device::cpu());
  Tensor x = ramp(512, 256);
  RunOptions one, two;
  one.threads = 1;
  two.threads = 2;
  auto a = model.run({x}, one);
  auto b = model.run({x}, two);
  EXPECT_EQ(std::memcmp(a[0].raw_data(), b[0].raw_data(), a[0].nbytes()), 0);
}

TEST(Executor, KernelErrorsNameTheNode) {
  auto g = chain(1, 4);
  g->nodes[0].op_type = "Reshape";  // Reshape needs a shape input: missing
  g->opset_imports[""] = 13;
  try {
    Model model(g, Device::cpu());
    model.run({ramp(1, 4)});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[Reshape] node 'n0'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace dprun
