// onednn::execute_reusing (ops/cpu/onednn_util.h): a thread's memory objects of a primitive are
// pointed at each call's data, stay apart between threads, and are dropped and remade when the
// thread's cache starts over; run_sized runs small work on one thread.
#include <gtest/gtest.h>

#include <omp.h>

#include <thread>
#include <vector>

#include "kernel_test_util.h"
#include "ops/cpu/onednn_util.h"

namespace dprun {
namespace {

using dnnl::memory;

/// y[1, n] = x[1, k] * w[k, n] + bias[n], as one oneDNN matmul.
struct SmallMatmul {
  int64_t k, n;
  memory::desc x_md, w_md, bias_md, y_md;
  dnnl::matmul::primitive_desc pd;
  dnnl::matmul prim;

  SmallMatmul(int64_t k_, int64_t n_)
      : k(k_),
        n(n_),
        x_md(onednn::plain_desc({1, k})),
        w_md(onednn::plain_desc({k, n})),
        bias_md(onednn::plain_desc({1, n})),
        y_md(onednn::plain_desc({1, n})),
        pd(dnnl::matmul::desc(x_md, w_md, bias_md, y_md), onednn::concurrent_attr(),
           onednn::cpu_engine()),
        prim(pd) {}

  /// Runs it on `x` and checks the result against a hand-written product.
  void check(const std::vector<float>& x, const std::vector<float>& w,
             const std::vector<float>& bias) const {
    std::vector<float> y(static_cast<size_t>(n), -1.f);
    onednn::execute_reusing(prim, pd.scratchpad_desc(),
                            {{DNNL_ARG_SRC, &x_md, x.data()},
                             {DNNL_ARG_WEIGHTS, &w_md, w.data()},
                             {DNNL_ARG_BIAS, &bias_md, bias.data()},
                             {DNNL_ARG_DST, &y_md, y.data()}});
    for (int64_t j = 0; j < n; ++j) {
      float want = bias[static_cast<size_t>(j)];
      for (int64_t i = 0; i < k; ++i)
        want += x[static_cast<size_t>(i)] * w[static_cast<size_t>(i * n + j)];
      ASSERT_NEAR(y[static_cast<size_t>(j)], want, 1e-4) << "column " << j;
    }
  }
};

std::vector<float> ramp(size_t count, float start, float step) {
  std::vector<float> v(count);
  for (size_t i = 0; i < count; ++i) v[i] = start + step * static_cast<float>(i);
  return v;
}

TEST(OnednnExecuteReusing, EveryCallReadsAndWritesItsOwnBuffers) {
  const SmallMatmul mm(5, 3);
  const std::vector<float> w = ramp(15, -1.f, 0.125f), bias = ramp(3, 0.5f, 1.f);
  // Fresh buffers on every call: the kept memory objects must follow them.
  for (int call = 0; call < 4; ++call) {
    SCOPED_TRACE(call);
    mm.check(ramp(5, static_cast<float>(call), 0.5f), w, bias);
  }
}

TEST(OnednnExecuteReusing, ThreadsKeepTheirOwnObjects) {
  const SmallMatmul mm(7, 4);
  const std::vector<float> w = ramp(28, 0.25f, -0.0625f), bias = ramp(4, -2.f, 0.75f);
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t)
    threads.emplace_back([&, t] {
      for (int call = 0; call < 200; ++call)
        mm.check(ramp(7, static_cast<float>(t * 1000 + call), 1.f), w, bias);
    });
  for (auto& thread : threads) thread.join();
}

TEST(OnednnExecuteReusing, ManyPrimitivesStartTheCacheOver) {
  // More primitives than a thread keeps objects for (1024): each still computes its own
  // product, and the first ones run again after their objects were dropped.
  std::vector<SmallMatmul> matmuls;
  matmuls.reserve(1100);
  for (int64_t i = 0; i < 1100; ++i) matmuls.emplace_back(1 + i % 4, 1 + i % 3);
  for (int round = 0; round < 2; ++round)
    for (const SmallMatmul& mm : matmuls)
      mm.check(ramp(static_cast<size_t>(mm.k), 1.f + static_cast<float>(round), 0.5f),
               ramp(static_cast<size_t>(mm.k * mm.n), -0.5f, 0.25f),
               ramp(static_cast<size_t>(mm.n), 0.f, 1.f));
}

}  // namespace
}  // namespace dprun

namespace dprun {
namespace {

struct BufferOwnerA {};
struct BufferOwnerB {};

TEST(OnednnRunSized, WorkBelowTheBoundRunsOnOneThread) {
  auto execution = testing::cpu_execution(2);
  Node node;
  node.op_type = "MatMul";
  std::vector<const Tensor*> inputs;
  std::vector<Tensor> outputs;
  KernelContext ctx(node, *execution, inputs, outputs);
  int openmp_threads = 0, kernel_threads = 0;
  const auto probe = [&] {
    openmp_threads = omp_get_max_threads();  // what a oneDNN primitive created here follows
    kernel_threads = ctx.threads();
  };
  onednn::run_sized(ctx, onednn::kSerialMultiplyAdds - 1, probe);
  EXPECT_EQ(openmp_threads, 1);
  EXPECT_EQ(kernel_threads, 1);
  onednn::run_sized(ctx, onednn::kSerialMultiplyAdds, probe);
  EXPECT_EQ(openmp_threads, 2);
  EXPECT_EQ(kernel_threads, 2);
  EXPECT_EQ(ctx.threads(), 2);
  EXPECT_EQ(omp_get_max_threads(), 2);
}

TEST(AlignedThreadBuffer, SixtyFourByteAlignedPerSlotOwnerAndThread) {
  std::vector<float*> seen;
  for (size_t floats : {1u, 17u, 1000u, 100000u}) {
    float* a0 = onednn::aligned_thread_buffer<BufferOwnerA>(0, floats);
    float* a1 = onednn::aligned_thread_buffer<BufferOwnerA>(1, floats);
    float* b0 = onednn::aligned_thread_buffer<BufferOwnerB>(0, floats);
    for (float* p : {a0, a1, b0}) EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u) << floats;
    EXPECT_NE(a0, a1);
    EXPECT_NE(a0, b0);
    a0[floats - 1] = 1.f;  // the whole extent is usable
    a1[floats - 1] = 2.f;
    EXPECT_EQ(a0[floats - 1], 1.f);
  }
  // Kept between calls once large enough; another thread has its own.
  float* kept = onednn::aligned_thread_buffer<BufferOwnerA>(0, 10);
  EXPECT_EQ(onednn::aligned_thread_buffer<BufferOwnerA>(0, 100000), kept);
  float* other = nullptr;
  std::thread([&] { other = onednn::aligned_thread_buffer<BufferOwnerA>(0, 10); }).join();
  EXPECT_NE(other, kept);
}

}  // namespace
}  // namespace dprun
