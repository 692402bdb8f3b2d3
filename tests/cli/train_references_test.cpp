// `dprun train` against PyTorch: every case under models/training (made by
// make_references.py with torch.optim and a simulated DataParallel) is trained through the
// command line, and its per-step losses and trained initializers (parameters and BatchNorm
// statistics) are compared with PyTorch's at 1e-4 relative, 1e-6 absolute tolerance (float32
// math in both; the absolute floor covers parameters whose gradient is rounding noise, such
// as a bias right before a training-mode BatchNormalization). Each case runs on the CPU devices
// its .args names and on as many simulated accelerators (sim:N, the plan and copies a GPU
// gets, engine/backends/sim). Each case also trains in mixed precision (--precision bfloat16,
// and float16 with loss scaling), whose losses must stay within 5% (bfloat16) or 0.5%
// (float16) of PyTorch's float32 ones, whose trained initializers must stay float32, and whose
// parameters must have moved as PyTorch's did, within 16-bit error (UpdateBounds below).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <sstream>
#include <tuple>

#include "accelerator_test_util.h"
#include "cli_test_util.h"
#include "loader/npy.h"
#include "loader/onnx_loader.h"

namespace dprun {
namespace {

namespace fs = std::filesystem;
using testing::run_dprun;
using testing::source_path;

constexpr double kRelative = 1e-4, kAbsolute = 1e-6;

std::vector<std::string> reference_cases() {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(source_path("models/training")))
    if (entry.path().extension() == ".args") names.push_back(entry.path().stem().string());
  std::sort(names.begin(), names.end());
  return names;
}

/// The command line of reference case `name` on `device_type` devices, writing its model and
/// json into `out`, with `extra` options.
std::string train_command(const std::string& name, const std::string& device_type,
                          const fs::path& out, const std::string& extra = "") {
  const fs::path dir = source_path("models/training");
  std::string args = testing::read_text(dir / (name + ".args"));
  args.erase(args.find_last_not_of(" \n") + 1);
  // The files' paths are relative to the repository root.
  args = std::regex_replace(args, std::regex("models/training/"), dir.string() + "/");
  args = std::regex_replace(args, std::regex("cpu:"), device_type + ":");
  return "train " + (dir / (name + ".onnx")).string() + " " + args + " --save " +
         (out / "trained.onnx").string() + " --json " + (out / "run.json").string() + extra;
}

/// Expects the losses of the run in `out` to be PyTorch's in `reference`.losses.npy (a case's
/// name, or NAME.cpuN for its training on N devices), each within `absolute` + `relative`
/// times its size.
void expect_losses_near(const std::string& reference, const fs::path& out, double relative,
                        double absolute) {
  Tensor expected =
      read_npy((fs::path(source_path("models/training")) / (reference + ".losses.npy")).string());
  std::vector<double> losses = testing::numbers(testing::read_json(out / "run.json"), "losses")
                                   .value_or(std::vector<double>{});
  ASSERT_EQ(static_cast<int64_t>(losses.size()), expected.numel());
  for (size_t s = 0; s < losses.size(); ++s) {
    double e = expected.item_as_double(static_cast<int64_t>(s));
    EXPECT_NEAR(losses[s], e, absolute + relative * std::abs(e)) << "loss of step " << s + 1;
  }
}

/// Expects every initializer of the model at `trained` within the tolerance of PyTorch's in
/// `reference`.trained.onnx, and no other.
void expect_initializers_near(const std::string& reference, const fs::path& trained_path) {
  auto trained = load_graph(trained_path.string());
  auto want_graph = load_graph(
      (fs::path(source_path("models/training")) / (reference + ".trained.onnx")).string());
  ASSERT_EQ(trained->initializers.size(), want_graph->initializers.size());
  for (const auto& [param, want] : want_graph->initializers) {
    ASSERT_TRUE(trained->initializers.count(param)) << param;
    const Tensor& got = trained->initializers.at(param);
    ASSERT_EQ(got.shape(), want.shape()) << param;
    for (int64_t i = 0; i < want.numel(); ++i) {
      double w = want.item_as_double(i);
      ASSERT_NEAR(got.item_as_double(i), w, kAbsolute + kRelative * std::abs(w))
          << param << "[" << i << "]";
    }
  }
}

class TrainReference : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

TEST_P(TrainReference, MatchesPyTorch) {
  const auto& [name, device_type] = GetParam();
  fs::path dir = source_path("models/training");
  fs::path out = testing::scratch_path("dprun_train_" + name + "_" + device_type);
  fs::create_directories(out);
  auto r = run_dprun(train_command(name, device_type, out));
  ASSERT_EQ(r.status, 0) << r.output;
  expect_losses_near(name, out, kRelative, kAbsolute);
  expect_initializers_near(name, out / "trained.onnx");
  // Cases that clip: each step's total norm before clipping, as clip_grad_norm_ returned it.
  const fs::path norms_file = dir / (name + ".grad_norms.npy");
  const std::optional<std::vector<double>> norms =
      testing::numbers(testing::read_json(out / "run.json"), "grad_norms");
  ASSERT_EQ(norms.has_value(), fs::exists(norms_file));
  if (norms) {
    const Tensor want = read_npy(norms_file.string());
    ASSERT_EQ(static_cast<int64_t>(norms->size()), want.numel());
    for (size_t s = 0; s < norms->size(); ++s)
      EXPECT_NEAR((*norms)[s], want.item_as_double(static_cast<int64_t>(s)),
                  kRelative * want.item_as_double(static_cast<int64_t>(s)))
          << "norm of step " << s + 1;
  }
  fs::remove_all(out);
}

/// The reference cases trained on other device counts than their .args name, as
/// make_references.py writes them for the architectures: {case, N} for each
/// NAME.cpuN.losses.npy.
std::vector<std::tuple<std::string, int>> other_device_counts() {
  std::vector<std::tuple<std::string, int>> found;
  const std::regex file(R"((.+)\.cpu([0-9]+)\.losses\.npy)");
  for (const auto& entry : fs::directory_iterator(source_path("models/training"))) {
    std::smatch m;
    const std::string filename = entry.path().filename().string();
    if (std::regex_match(filename, m, file)) found.emplace_back(m[1].str(), std::stoi(m[2].str()));
  }
  std::sort(found.begin(), found.end());
  return found;
}

/// `command` with its --devices list replaced by cpu:0 .. cpu:N-1.
std::string on_cpu_devices(const std::string& command, int n) {
  std::string devices = "--devices cpu:0";
  for (int i = 1; i < n; ++i) devices += ",cpu:" + std::to_string(i);
  return std::regex_replace(command, std::regex("--devices [^ ]+"), devices);
}

// Each architecture on 1 and 3 devices as well as on its case's own count: the chunks (and the
// BatchNorm statistics of each replica) differ, and so do PyTorch's references.
class TrainOnOtherDeviceCounts : public ::testing::TestWithParam<std::tuple<std::string, int>> {};

TEST_P(TrainOnOtherDeviceCounts, MatchesPyTorch) {
  const auto& [name, devices] = GetParam();
  const std::string reference = name + ".cpu" + std::to_string(devices);
  fs::path out = testing::scratch_path("dprun_train_" + reference);
  fs::create_directories(out);
  auto r = run_dprun(on_cpu_devices(train_command(name, "cpu", out), devices));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find(devices == 1 ? "on cpu:0:" : "cpu:" + std::to_string(devices - 1)),
            std::string::npos)
      << r.output;
  expect_losses_near(reference, out, kRelative, kAbsolute);
  expect_initializers_near(reference, out / "trained.onnx");
  fs::remove_all(out);
}

INSTANTIATE_TEST_SUITE_P(Architectures, TrainOnOtherDeviceCounts,
                         ::testing::ValuesIn(other_device_counts()), [](const auto& info) {
                           return std::get<0>(info.param) + "_on_" +
                                  std::to_string(std::get<1>(info.param));
                         });

// How far a 16-bit run's parameter updates may be from PyTorch's float32 ones. An update is
// the trained value minus the initial one (the case's .onnx); its error is
// ||d_dprun - d_torch|| / ||d_torch||, over one initializer (per_tensor) and over all the
// case's parameters as one vector (whole; the BatchNorm running statistics are left out of it,
// as no learning rate moves them). Parameters PyTorch does not move (every element by at most
// kUpdateFloor) are skipped, those whose gradient is 0: not moved at all (cnn_bn_*'s conv
// biases right before a training-mode BatchNormalization; shufflenet_dp2's unit1.bn2.bias,
// unit2.bn2.bias and unit3.branch2.4.bias) or by rounding noise (mobilenet_*'s v2.conv.3.bias,
// 5.2e-6); the smallest update checked is 1.3e-4.
//
// A run without an update has error exactly 1 in every initializer and as a whole, whatever the
// machine. Measured on this project's CPUs (cpu and sim give the same numbers), and with
// --lr twice the case's in the same precision (a wrong learning rate):
//   bfloat16 (8 significant bits, a rounding 2^-8 = 0.0039): whole 0.0022-0.0047 for the MLP
//     and loss cases but mlp_adamw (0.061), up to 0.096 for the deep ones (shufflenet_dp2; vit
//     0.080, gpt_smooth_ignore 0.068), per tensor at most 0.50 (vit_adamw_dp2's
//     layers.0.norm1.weight). Bounds 0.25 whole (2.6x the worst; no update 4x over it, 2x lr
//     0.72-1.28, 2.9x over it) and 0.8 per tensor (1.6x the worst; no update 1.25x over it).
//     resnet_mini drifts far further (its third loss is 2.7% off): whole 0.455, per tensor up
//     to 1.09 (layer2.0.bn1.weight), so it is held to 0.8 whole only (1.76x its error; no
//     update 1.25x over it, 2x lr 2.28).
//   float16 (11 significant bits, 2^-11 = 0.00049): whole 0.0002-0.0006 for the MLP and loss
//     cases, up to 0.077 for the BatchNorm ones (cnn_bn_1dev, resnet_mini), per tensor at most
//     0.31 (resnet_mini's layer3.0.bn2.weight). Bounds 0.15 whole (1.9x the worst; no update
//     6.7x over it, 2x lr 0.72-1.79, 4.8x over it) and 0.5 per tensor (1.6x; no update 2x).
// A learning rate 1.2x the case's passes in bfloat16 (whole 0.17-0.24, resnet_mini 0.63), and
// 1.1x in float16 in all but resnet_mini (0.08-0.13; 0.26): the check finds a lost or badly
// wrong update, not a slightly wrong one. UpdateCheck and WrongLearningRate below run the
// failing cases.
constexpr double kUpdateFloor = 1e-5;

struct UpdateBounds {
  double whole;
  std::optional<double> per_tensor;  // none: not checked tensor by tensor
};

UpdateBounds update_bounds(const std::string& name, const std::string& precision) {
  if (precision == "float16") return {0.15, 0.5};
  if (name == "resnet_mini") return {0.8, std::nullopt};
  return {0.25, 0.8};
}

struct UpdateErrors {
  double whole = 0;
  std::map<std::string, double> per_tensor;  // the initializers checked
};

/// The errors of `trained`'s updates against PyTorch's, for case `name`.
UpdateErrors update_errors(const std::string& name, const Graph& trained) {
  const fs::path dir = source_path("models/training");
  auto initial = load_graph((dir / (name + ".onnx")).string());
  auto reference = load_graph((dir / (name + ".trained.onnx")).string());
  UpdateErrors errors;
  double whole_error = 0, whole_norm = 0;
  for (const auto& [param, want] : reference->initializers) {
    const Tensor& before = initial->initializers.at(param);
    const Tensor& got = trained.initializers.at(param);
    EXPECT_EQ(got.numel(), want.numel()) << param;
    double largest = 0, error = 0, norm = 0;
    for (int64_t i = 0; i < want.numel(); ++i) {
      const double torch = want.item_as_double(i) - before.item_as_double(i);
      const double ours = got.item_as_double(i) - before.item_as_double(i);
      largest = std::max(largest, std::abs(torch));
      error += (ours - torch) * (ours - torch);
      norm += torch * torch;
    }
    if (largest <= kUpdateFloor) continue;
    errors.per_tensor[param] = std::sqrt(error / norm);
    if (param.find("running_") == std::string::npos) {
      whole_error += error;
      whole_norm += norm;
    }
  }
  errors.whole = std::sqrt(whole_error / whole_norm);
  return errors;
}

/// Trains case `name` on `device_type` devices in `precision` (`options` adds to it), expects
/// its losses within `tolerance` of PyTorch's float32 ones, its trained initializers of their
/// float32 dtypes and its updates within update_bounds, and returns the run's --json report.
nlohmann::json expect_16bit_run_near_pytorch(const std::string& name,
                                             const std::string& device_type,
                                             const std::string& precision,
                                             const std::string& options, double tolerance) {
  fs::path out = testing::scratch_path("dprun_train_16bit_" + name + "_" + device_type);
  fs::create_directories(out);
  auto r = run_dprun(train_command(name, device_type, out, " --precision " + precision + options));
  EXPECT_EQ(r.status, 0) << r.output;
  expect_losses_near(name, out, tolerance, 0);
  auto trained = load_graph((out / "trained.onnx").string());
  auto reference =
      load_graph((fs::path(source_path("models/training")) / (name + ".trained.onnx")).string());
  for (const auto& [param, want] : reference->initializers)
    EXPECT_EQ(trained->initializers.at(param).dtype(), want.dtype()) << param;
  const UpdateBounds bounds = update_bounds(name, precision);
  const UpdateErrors errors = update_errors(name, *trained);
  EXPECT_LT(errors.whole, bounds.whole) << "the error of the whole update";
  if (bounds.per_tensor) {
    for (const auto& [param, error] : errors.per_tensor)
      EXPECT_LT(error, *bounds.per_tensor) << "the error of " << param << "'s update";
  }
  nlohmann::json report = testing::read_json(out / "run.json");
  fs::remove_all(out);
  return report;
}

// bfloat16 keeps 8 significant bits: a loss that the model itself computes (loss_none) is
// rounded to them (0.5% off), and a few steps of training drift (resnet_mini's third loss by
// 2.7% on this project's CPUs); a wrong gradient shows as more, but a lost update need not
// (several cases stay within 5% without any), so the updates are checked too.
TEST_P(TrainReference, InBfloat16StaysNearPyTorchsFloat32) {
  const auto& [name, device_type] = GetParam();
  expect_16bit_run_near_pytorch(name, device_type, "bfloat16", "", 0.05);
}

// float16 keeps 11 significant bits: the losses stay within 0.07% of PyTorch's float32 ones on
// this project's CPUs (resnet_mini's), checked at 0.5%. The scale 1024 overflows no gradient
// of these models (at the default 65536 resnet_mini's first step does), so every step is taken
// and the losses stay comparable step by step.
TEST_P(TrainReference, InFloat16WithLossScalingStaysNearPyTorchsFloat32) {
  const auto& [name, device_type] = GetParam();
  const nlohmann::json report =
      expect_16bit_run_near_pytorch(name, device_type, "float16", " --loss-scale 1024", 0.005);
  EXPECT_EQ(testing::numbers(report, "skipped_steps"), std::vector<double>{}) << report;
}

// The update bounds fail for the runs they are there to catch: no update at all (the initial
// model as the trained one: error 1 in every parameter) and a learning rate twice the case's,
// in each 16-bit precision, on CPU devices.
class UpdateCheck : public ::testing::TestWithParam<std::string> {};

TEST_P(UpdateCheck, NoUpdateFailsTheBound) {
  const std::string& name = GetParam();
  auto initial = load_graph(source_path("models/training/" + name + ".onnx"));
  const UpdateErrors errors = update_errors(name, *initial);
  for (const std::string precision : {"bfloat16", "float16"}) {
    const UpdateBounds bounds = update_bounds(name, precision);
    EXPECT_GE(errors.whole, bounds.whole) << precision;
    if (bounds.per_tensor) {
      for (const auto& [param, error] : errors.per_tensor)
        EXPECT_GE(error, *bounds.per_tensor) << precision << " " << param;
    }
  }
}

class WrongLearningRate : public ::testing::TestWithParam<std::string> {};

TEST_P(WrongLearningRate, FailsTheBound) {
  const std::string& name = GetParam();
  fs::path out = testing::scratch_path("dprun_train_lr2_" + name);
  fs::create_directories(out);
  std::string command = train_command(name, "cpu", out);
  // --lr X becomes --lr 2X (--param-lr groups keep theirs).
  std::smatch lr;
  ASSERT_TRUE(std::regex_search(command, lr, std::regex(" --lr ([-0-9.e+]+)"))) << command;
  command =
      lr.prefix().str() + " --lr " + std::to_string(2 * std::stod(lr[1].str())) + lr.suffix().str();
  for (const std::string precision : {"bfloat16", "float16"}) {
    SCOPED_TRACE(precision);
    auto r = run_dprun(command + " --precision " + precision +
                       (precision == "float16" ? " --loss-scale 1024" : ""));
    ASSERT_EQ(r.status, 0) << r.output;
    const UpdateErrors errors = update_errors(name, *load_graph((out / "trained.onnx").string()));
    EXPECT_GT(errors.whole, update_bounds(name, precision).whole);
  }
  fs::remove_all(out);
}

INSTANTIATE_TEST_SUITE_P(Cases, UpdateCheck, ::testing::ValuesIn(reference_cases()));

// The doubled learning rate, on the cases nearest the bounds or apart from the others (every case
// failed it when measured; each test here trains twice): losses_mse has the smallest error at 2x lr
// (0.72), mlp_param_lr_dp2 doubles one of its two groups' lr, mlp_adam and gpt_adamw take Adam and
// AdamW steps, cnn_bn_1dev has the largest float16 error, resnet_mini its own bound.
INSTANTIATE_TEST_SUITE_P(Some, WrongLearningRate,
                         ::testing::Values("losses_mse", "mlp_param_lr_dp2", "mlp_adam",
                                           "gpt_adamw", "cnn_bn_1dev", "resnet_mini"));

INSTANTIATE_TEST_SUITE_P(Cases, TrainReference,
                         ::testing::Combine(::testing::ValuesIn(reference_cases()),
                                            ::testing::Values("cpu", "sim")),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_" + std::get<1>(info.param);
                         });

}  // namespace
}  // namespace dprun
