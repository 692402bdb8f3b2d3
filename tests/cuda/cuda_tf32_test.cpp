// PlanOptions::allow_tf32 on cuda:0: float32 MatMul, Gemm and Conv run on TF32 tensor cores
// (inputs rounded to a 10-bit mantissa) only when it is on. Each product is compared with a
// float64 sum on the host: within float32 rounding without TF32, within TF32's rounding with it.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "cuda_test_util.h"
#include "engine/model.h"
#include "graph_test_util.h"

namespace dprun {
namespace {

using testing::make_graph;
using testing::make_node;

Tensor uniform(Shape shape, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  Tensor t = Tensor::empty(std::move(shape), DType::Float32);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = dist(rng);
  return t;
}

// The largest |got - want| over the largest |want|, with want = a[m, k] b[k, n] in double.
double matmul_error(const Tensor& a, const Tensor& b, const Tensor& got) {
  const int64_t m = a.dim(0), k = a.dim(1), n = b.dim(1);
  double worst = 0, scale = 1e-30;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double want = 0;
      for (int64_t p = 0; p < k; ++p)
        want += static_cast<double>(a.data<float>()[i * k + p]) * b.data<float>()[p * n + j];
      worst = std::max(worst, std::abs(got.data<float>()[i * n + j] - want));
      scale = std::max(scale, std::abs(want));
    }
  return worst / scale;
}

// TF32 tensor cores exist from compute capability 8.0 (Ampere) on.
bool gpu_has_tf32() {
  cudaDeviceProp prop{};
  return cudaGetDeviceProperties(&prop, 0) == cudaSuccess && prop.major >= 8;
}

std::vector<Tensor> run_on_gpu(const std::shared_ptr<Graph>& graph, bool tf32,
                               const std::vector<Tensor>& inputs) {
  graph->opset_imports[""] = 17;
  Model model(graph, Device::cuda(0), ModelOptions{.plan = {.allow_tf32 = tf32}});
  std::vector<Tensor> on_gpu;
  for (const Tensor& t : inputs) on_gpu.push_back(t.to(Device::cuda(0)));
  std::vector<Tensor> out = model.run(on_gpu);
  for (Tensor& t : out) t = t.to(Device::cpu());
  return out;
}

TEST(CudaTf32, MatMulAndGemmUseTf32OnlyWhenAllowed) {
  DPRUN_REQUIRE_CUDA_GPU();
  const Tensor a = uniform({96, 512}, 1), b = uniform({512, 80}, 2);
  for (const char* op : {"MatMul", "Gemm"}) {
    SCOPED_TRACE(op);
    auto graph = make_graph({make_node(op, {"a", "b"}, {"y"})},
                            {{"a", DType::Float32}, {"b", DType::Float32}}, {"y"});
    const double exact = matmul_error(a, b, run_on_gpu(graph, false, {a, b})[0]);
    const double rounded = matmul_error(a, b, run_on_gpu(graph, true, {a, b})[0]);
    EXPECT_LT(exact, 1e-5);  // float32 sums of 512 products
    // TF32 keeps 10 mantissa bits of each operand: about 1e-3 relative per product.
    EXPECT_LT(rounded, 1e-2);
    if (gpu_has_tf32()) {
      EXPECT_GT(rounded, 10 * exact) << "TF32 unused (exact " << exact << ")";
    }
  }
}

// The largest |got - want| over the largest |want|, with want a 3x3 convolution (stride 1,
// pads 1) of x [N, C, H, W] by w [M, C, 3, 3] summed in double.
double conv3x3_error(const Tensor& x, const Tensor& w, const Tensor& got) {
  const int64_t n_ = x.dim(0), c_ = x.dim(1), h_ = x.dim(2), w_ = x.dim(3), m_ = w.dim(0);
  const float* xs = x.data<float>();
  const float* ws = w.data<float>();
  double worst = 0, scale = 1e-30;
  for (int64_t n = 0; n < n_; ++n)
    for (int64_t m = 0; m < m_; ++m)
      for (int64_t i = 0; i < h_; ++i)
        for (int64_t j = 0; j < w_; ++j) {
          double want = 0;
          for (int64_t c = 0; c < c_; ++c)
            for (int64_t ki = 0; ki < 3; ++ki)
              for (int64_t kj = 0; kj < 3; ++kj) {
                const int64_t y = i + ki - 1, x_ = j + kj - 1;
                if (y < 0 || y >= h_ || x_ < 0 || x_ >= w_) continue;
                want += static_cast<double>(xs[((n * c_ + c) * h_ + y) * w_ + x_]) *
                        ws[((m * c_ + c) * 3 + ki) * 3 + kj];
              }
          const double g = got.data<float>()[((n * m_ + m) * h_ + i) * w_ + j];
          worst = std::max(worst, std::abs(g - want));
          scale = std::max(scale, std::abs(want));
        }
  return worst / scale;
}

TEST(CudaTf32, ConvUsesTf32OnlyWhenAllowed) {
  DPRUN_REQUIRE_CUDA_GPU();
  // A ResNet-sized 3x3 convolution. (For a small 1x1 one, 2x256x8x8 by 64 channels and even
  // 8x256x28x28 by 256, cuDNN on an H200 ranks a float32 algorithm fastest with tensor-op math
  // allowed, and the two runs agree bit for bit.)
  const Tensor x = uniform({8, 64, 28, 28}, 3), w = uniform({64, 64, 3, 3}, 4);
  Node conv = make_node("Conv", {"x", "w"}, {"y"});
  conv.attributes["pads"] = Attribute::of_ints({1, 1, 1, 1});
  auto graph = make_graph({conv}, {{"x", DType::Float32}, {"w", DType::Float32}}, {"y"});
  const double exact = conv3x3_error(x, w, run_on_gpu(graph, false, {x, w})[0]);
  const double rounded = conv3x3_error(x, w, run_on_gpu(graph, true, {x, w})[0]);
  EXPECT_LT(exact, 1e-5);  // float32 sums of 576 products
  EXPECT_LT(rounded, 1e-2);
  if (gpu_has_tf32()) {
    EXPECT_GT(rounded, 10 * exact) << "TF32 unused (exact " << exact << ")";
  }
}

}  // namespace
}  // namespace dprun
