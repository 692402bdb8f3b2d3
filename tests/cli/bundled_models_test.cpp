// dprun on the bundled models, compared with PyTorch's outputs shipped beside them.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <regex>
#include <tuple>

#include "cli_test_util.h"
#include "cuda_test_util.h"
#include "loader/npy.h"
#include "loader/onnx_loader.h"

namespace dprun::testing {
namespace {

namespace fs = std::filesystem;

struct BundledModel {
  std::string name;
  std::vector<std::string> inputs;
  std::vector<std::string> outputs;
  friend void PrintTo(const BundledModel& m, std::ostream* os) { *os << m.name; }
};

// A model, and the devices it runs on: cpu:0, two simulated accelerators data-parallel (host
// memory behind a device boundary, the plan a GPU gets), and cuda:0 where a GPU is present.
class BundledModels : public ::testing::TestWithParam<std::tuple<BundledModel, std::string>> {};

// Worst ratio |got - want| / (1e-4 * |want| + 1e-6 * max|want|): below 1 means every element
// is within 1e-4 relative error, with an absolute floor of 1e-6 of the tensor's scale for
// elements near zero, where float32 rounding noise dominates any relative measure.
double tolerance_ratio(const Tensor& got, const Tensor& want) {
  double scale = 0;
  for (int64_t i = 0; i < want.numel(); ++i)
    scale = std::max(scale, std::fabs(want.item_as_double(i)));
  double worst = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    double a = got.item_as_double(i), b = want.item_as_double(i);
    worst = std::max(worst, std::fabs(a - b) / (1e-4 * std::fabs(b) + 1e-6 * scale + 1e-30));
  }
  return worst;
}

TEST_P(BundledModels, MatchesPyTorch) {
  const auto& [m, devices] = GetParam();
  if (devices.starts_with("cuda")) {
    const std::string why = cuda_unusable_reason();
    if (!why.empty()) GTEST_SKIP() << "needs a CUDA GPU: " << why;
  }
  fs::path out_dir = scratch_path("dprun_bundled_" + m.name);
  fs::remove_all(out_dir);
  std::string args = source_path("models/" + m.name + ".onnx") + " --devices " + devices +
                     " --output-dir " + out_dir.string();
  for (const auto& in : m.inputs)
    args += " --input " + in + "=" + source_path("models/" + m.name + ".input." + in + ".npy");
  CommandResult r = run_dprun(args);
  ASSERT_EQ(r.status, 0) << r.output;
  for (const auto& out : m.outputs) {
    Tensor want = read_npy(source_path("models/" + m.name + ".output." + out + ".npy"));
    Tensor got = read_npy((out_dir / (out + ".npy")).string());
    ASSERT_EQ(got.shape(), want.shape()) << out;
    ASSERT_EQ(got.dtype(), want.dtype()) << out;
    EXPECT_LT(tolerance_ratio(got, want), 1.0) << m.name << " output " << out;
  }
  fs::remove_all(out_dir);
}

INSTANTIATE_TEST_SUITE_P(
    Models, BundledModels,
    ::testing::Combine(::testing::Values(BundledModel{"mlp", {"input"}, {"logits"}},
                                         BundledModel{"cnn", {"image"}, {"logits"}},
                                         BundledModel{"transformer",
                                                      {"input_ids", "attention_mask"},
                                                      {"hidden", "pooled"}}),
                       ::testing::Values("cpu:0", "sim:0,sim:1", "cuda:0")),
    [](const auto& info) {
      std::string devices = std::get<1>(info.param);
      devices = devices.substr(0, devices.find(':'));  // cpu, sim or cuda
      return std::get<0>(info.param).name + "_" + devices;
    });

TEST(BundledModels, RandomInputsFollowBatchAndAreDeterministic) {
  auto first = run_dprun(source_path("models/cnn.onnx") + " --batch 3");
  auto second = run_dprun(source_path("models/cnn.onnx") + " --batch 3");
  ASSERT_EQ(first.status, 0) << first.output;
  EXPECT_NE(first.output.find("float32[3, 10]"), std::string::npos) << first.output;
  auto values = [](const std::string& text) { return text.substr(text.find("logits"), 120); };
  EXPECT_EQ(values(first.output), values(second.output));
}

TEST(BundledModels, AllowTf32ChangesNoCpuResult) {
  // TF32 is a GPU math mode: on CPU devices the flag is accepted by run, bench and train and
  // leaves every bit of the outputs as it was.
  const std::string model = source_path("models/mlp.onnx") + " --devices cpu:0,cpu:1 --batch 4";
  const fs::path plain_dir = scratch_path("dprun_tf32_off"),
                 tf32_dir = scratch_path("dprun_tf32_on");
  ASSERT_EQ(run_dprun(model + " --output-dir " + plain_dir.string()).status, 0);
  CommandResult r = run_dprun(model + " --allow-tf32 --output-dir " + tf32_dir.string());
  ASSERT_EQ(r.status, 0) << r.output;
  Tensor plain = read_npy((plain_dir / "logits.npy").string());
  Tensor tf32 = read_npy((tf32_dir / "logits.npy").string());
  ASSERT_EQ(tf32.shape(), plain.shape());
  EXPECT_EQ(std::memcmp(tf32.raw_data(), plain.raw_data(), plain.nbytes()), 0);
  fs::remove_all(plain_dir);
  fs::remove_all(tf32_dir);
  r = run_dprun("bench " + model + " --allow-tf32 --iters 2");
  EXPECT_EQ(r.status, 0) << r.output;
  r = run_dprun("run --help");
  EXPECT_NE(r.output.find("--allow-tf32           float32 MatMul, Gemm and convolutions on GPUs"),
            std::string::npos)
      << r.output;
}

TEST(BundledModels, AllowWinogradStaysCloseToPyTorch) {
  // run takes the flag, and the logits stay within the 1e-4 bound of the PyTorch reference that
  // MatchesPyTorch uses (the bundled CNN's 3x3 convolutions are below the size where Winograd
  // pays, so they run as before; the Winograd path itself is tested on ConvNHWC).
  const fs::path out_dir = scratch_path("dprun_winograd");
  CommandResult r = run_dprun(source_path("models/cnn.onnx") + " --devices cpu:0 --input image=" +
                              source_path("models/cnn.input.image.npy") +
                              " --allow-winograd --output-dir " + out_dir.string());
  ASSERT_EQ(r.status, 0) << r.output;
  Tensor want = read_npy(source_path("models/cnn.output.logits.npy"));
  Tensor got = read_npy((out_dir / "logits.npy").string());
  ASSERT_EQ(got.shape(), want.shape());
  EXPECT_LT(tolerance_ratio(got, want), 1.0);
  fs::remove_all(out_dir);
  r = run_dprun("run --help");
  EXPECT_NE(r.output.find("--allow-winograd       float32 3x3 stride-1 convolutions on CPUs"),
            std::string::npos)
      << r.output;
}

TEST(BundledModels, OutputsAreReadableByNumpy) {
  fs::path out_dir = fs::temp_directory_path() / "dprun_numpy_check";
  fs::remove_all(out_dir);
  ASSERT_EQ(
      run_dprun(source_path("models/mlp.onnx") + " --batch 2 --output-dir " + out_dir.string())
          .status,
      0);
  std::string check = "/usr/bin/python3 -c \"import numpy as n; a=n.load('" +
                      (out_dir / "logits.npy").string() +
                      "'); assert a.shape==(2,10) and a.dtype==n.float32, a\"";
  EXPECT_EQ(std::system(check.c_str()), 0);
  fs::remove_all(out_dir);
}

TEST(BundledModels, InspectListsInputsOpsAndParameters) {
  auto r = run_dprun("inspect " + source_path("models/transformer.onnx"));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("input_ids"), std::string::npos);
  EXPECT_NE(r.output.find("int64[batch, seq]"), std::string::npos);
  EXPECT_NE(r.output.find("LayerNormalization"), std::string::npos);
  EXPECT_NE(r.output.find("parameters:"), std::string::npos);
  EXPECT_NE(r.output.find("every node has a cpu kernel"), std::string::npos) << r.output;
}

TEST(BundledModels, InspectDevicesSaysWhereEachNodeRuns) {
  auto r = run_dprun("inspect " + source_path("models/mlp.onnx") + " --devices cpu:0,cuda:0");
  ASSERT_EQ(r.status, 0) << r.output;
  // Each backend's rewrite fuses both Gemm + Relu pairs, and placement is of what it compiles.
  EXPECT_NE(r.output.find("\nrewrite for cpu: 5 nodes become 3 (dprun::FusedGemm 2 (Relu 2))\n"
                          "placement on cpu: 3 nodes on cpu\n"),
            std::string::npos)
      << r.output;
  const bool cuda_build = [] {
    try {
      backend_for(DeviceType::CUDA);
      return true;
    } catch (const Error&) {
      return false;
    }
  }();
  EXPECT_EQ(r.output.find("\nrewrite for cuda: 5 nodes become 3 (dprun::FusedGemm 2 (Relu 2))\n"
                          "placement on cuda: ") != std::string::npos,
            cuda_build)
      << r.output;
  // On CUDA: each node (FusedGemm and Gemm, or 3 Gemm and 2 Relu in a build without the CUDA
  // backend) on the GPU or, listed, on the host.
  std::smatch counts;
  ASSERT_TRUE(std::regex_search(
      r.output, counts,
      std::regex("placement on cuda: ([0-9]+) nodes? on cuda, ([0-9]+) on the cpu \\(no cuda "
                 "kernel\\)\n")))
      << r.output;
  const int on_gpu = std::stoi(counts[1]), on_host = std::stoi(counts[2]);
  EXPECT_EQ(on_gpu + on_host, cuda_build ? 3 : 5);
  std::regex fallback_line(
      "\n  cpu  \\[(Gemm|Relu)\\] node '[^']+' \\(no kernel for opset 17 on "
      "cuda\\)");
  EXPECT_EQ(std::distance(std::sregex_iterator(r.output.begin(), r.output.end(), fallback_line),
                          std::sregex_iterator()),
            on_host)
      << r.output;
  // Where cuda:0 cannot be used, a note says why; planning needs no GPU.
  const std::string why = cuda_unusable_reason();
  EXPECT_EQ(r.output.find("  note: " + why + "\n") != std::string::npos, !why.empty()) << r.output;
}

// y = OP(Relu(x)) for x of `n` floats: node 'relu', then node `name` (OP in `domain`), whose
// output is of type `y_type`.
Graph relu_then(const std::string& name, const std::string& op, const std::string& domain,
                int64_t n, TensorType y_type) {
  Graph g;
  g.name = name;
  g.opset_imports[""] = 17;
  if (!domain.empty()) g.opset_imports[domain] = 1;
  g.inputs.push_back({"x", {DType::Float32, SymbolicShape{Dim::known(n)}}});
  Node relu;
  relu.name = "relu";
  relu.op_type = "Relu";
  relu.inputs = {"x"};
  relu.outputs = {"r"};
  Node second = relu;
  second.name = name;
  second.op_type = op;
  second.domain = domain;
  second.inputs = {"r"};
  second.outputs = {"y"};
  g.nodes = {relu, second};
  g.outputs.push_back({"y", std::move(y_type)});
  return g;
}

TEST(BundledModels, InspectNamesNodesWithoutAnyKernel) {
  const Graph g = relu_then("mystery", "Mystery", "dprun.none", 2,
                            {DType::Float32, SymbolicShape{Dim::known(2)}});
  const std::string path = scratch_path("inspect_mystery.onnx").string();
  save_graph(g, {}, path);
  auto r = run_dprun("inspect " + path + " --devices cpu:0");
  fs::remove(path);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("kernels: 1 node without a cpu kernel:\n  [Mystery] node 'mystery' "
                          "(unknown op)\nplacement on cpu: 1 node on cpu, 1 without any kernel\n"
                          "  none [Mystery] node 'mystery' (unknown op)\n"),
            std::string::npos)
      << r.output;
}

TEST(BundledModels, InspectListsWhatARunOnAGpuReadsBack) {
  // NonZero has no CUDA kernel: Relu's result comes back to the host for it. The transformer
  // keeps its shape arithmetic on the host and reads nothing back.
  const Graph g = relu_then("nz", "NonZero", "", 4,
                            {DType::Int64, SymbolicShape{Dim::known(1), Dim::named("n")}});
  const std::string path = scratch_path("inspect_reads_back.onnx").string();
  save_graph(g, {}, path);
  auto r = run_dprun("inspect " + path + " --devices cuda:0");
  fs::remove(path);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("  copies back from cuda per run: 1 (the host waits for the device at "
                          "each)\n    r, input 0 of [NonZero] node 'nz'\n"),
            std::string::npos)
      << r.output;
  // The transformer as the CUDA backend rewrites it (op fusion), which a build without CUDA
  // does not have: `inspect` shows that build the graph unrewritten.
  try {
    backend_for(DeviceType::CUDA);
  } catch (const Error&) {
    return;
  }
  r = run_dprun("inspect " + source_path("models/transformer.onnx") + " --devices cuda:0");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("  copies back from cuda per run: 0\n"), std::string::npos) << r.output;
}

TEST(BundledModels, InspectRejectsAMalformedDeviceList) {
  auto r = run_dprun("inspect " + source_path("models/mlp.onnx") + " --devices cuda:x");
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(r.output,
            "dprun: error: --devices: invalid device 'cuda:x': the index must be a non-negative "
            "integer\n");
}

}  // namespace
}  // namespace dprun::testing
