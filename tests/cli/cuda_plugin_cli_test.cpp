// The CUDA plugin (engine/cuda_plugin.h) as a process meets it: dprun links none of CUDA's
// libraries, the plugin links them all; a CPU run maps none of them and stays small; cuda:0
// says why it cannot run when the plugin is missing or cannot be loaded.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include <cctype>
#include <cstring>
#include <filesystem>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "cli/cli_test_util.h"
#include "engine/cuda_plugin.h"

extern char** environ;

namespace dprun::testing {
namespace {

namespace fs = std::filesystem;

const std::vector<std::string> kCudaLibraries = {"libcudart.so", "libcublas.so", "libcublasLt.so",
                                                 "libcudnn.so", "libnccl.so"};

std::string ldd_of(const fs::path& file) {
  return run_shell("ldd " + file.string() + " 2>&1").output;
}

fs::path plugin_file() {
  return fs::path(DPRUN_BINARY).parent_path() / "libdprun_cuda.so";
}

TEST(CudaPlugin, TheCliLinksNoCudaLibrary) {
  const std::string ldd = ldd_of(DPRUN_BINARY);
  ASSERT_NE(ldd.find("libdprun.so"), std::string::npos) << ldd;
  EXPECT_EQ(ldd.find("not found"), std::string::npos) << ldd;
  for (const std::string& library : kCudaLibraries)
    EXPECT_EQ(ldd.find("\t" + library), std::string::npos) << library << " in\n" << ldd;
}

TEST(CudaPlugin, ThePluginLinksEveryCudaLibraryExactlyWhenBuiltWithCuda) {
  EXPECT_EQ(fs::exists(plugin_file()), bool(DPRUN_WITH_CUDA)) << plugin_file();
  if (!DPRUN_WITH_CUDA) return;
  const std::string ldd = ldd_of(plugin_file());
  EXPECT_EQ(ldd.find("not found"), std::string::npos) << ldd;
  for (const std::string& library : kCudaLibraries)
    EXPECT_NE(ldd.find("\t" + library), std::string::npos) << library << " in\n" << ldd;
}

// The dynamic loader's record of every library a command opens (LD_DEBUG=files).
std::string libraries_opened(const std::string& arguments) {
  return run_shell("LD_DEBUG=files " + std::string(DPRUN_BINARY) + " " + arguments).output;
}

TEST(CudaPlugin, ACpuRunOpensNoCudaLibrary) {
  const std::string tutorial = source_path("models/tutorial/");
  std::vector<std::string> runs = {
      "--version", source_path("models/mlp.onnx") + " --devices cpu:0,cpu:1 --batch 4",
      "train " + tutorial + "classifier.train.onnx --input x=" + tutorial +
          "train.x.npy --target " + tutorial +
          "train.y.npy --loss cross_entropy --optimizer sgd --lr 0.1 --batch 32 --steps 2 "
          "--devices cpu:0 --save " +
          scratch_path("plugin_cpu_run.onnx").string()};
  // `all` asks the driver; without a GPU (this machine, CI) that opens nothing of CUDA's.
  if (driver_gpu_count() == 0)
    runs.push_back(source_path("models/mlp.onnx") + " --devices all --batch 4");
  for (const std::string& run : runs) {
    const std::string opened = libraries_opened(run);
    ASSERT_NE(opened.find("libdprun.so"), std::string::npos) << run << ":\n" << opened;
    for (const std::string& library : kCudaLibraries)
      EXPECT_EQ(opened.find(library), std::string::npos) << run << " opened " << library;
    EXPECT_EQ(opened.find("libdprun_cuda.so"), std::string::npos) << run;
  }
  fs::remove(scratch_path("plugin_cpu_run.onnx"));
}

// The peak resident memory of `argv` run to its end, in bytes, and its exit status.
std::pair<int64_t, int> peak_resident(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  const int spawned = posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0) return {-1, -1};
  int status = 0;
  rusage usage{};
  wait4(pid, &status, 0, &usage);
  return {static_cast<int64_t>(usage.ru_maxrss) * 1024, status};
}

TEST(CudaPlugin, ACpuRunStaysUnder80MiB) {
  const auto [bytes, status] = peak_resident(
      {DPRUN_BINARY, source_path("models/mlp.onnx"), "--devices", "cpu:0", "--batch", "8"});
  ASSERT_EQ(status, 0);
  EXPECT_LT(bytes, int64_t(80) << 20) << bytes / 1048576 << " MiB";
}

#if DPRUN_WITH_CUDA
TEST(CudaPlugin, Cuda0NamesAMissingPlugin) {
  const CommandResult r =
      run_shell("DPRUN_CUDA_PLUGIN=/nonexistent/libdprun_cuda.so " + std::string(DPRUN_BINARY) +
                " " + source_path("models/mlp.onnx") + " --devices cuda:0");
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.output,
            "dprun: error: device cuda:0: the CUDA backend /nonexistent/libdprun_cuda.so cannot be "
            "loaded: /nonexistent/libdprun_cuda.so: cannot open shared object file: No such file "
            "or directory\n");
}

TEST(CudaPlugin, APluginWithoutItsLibrariesNamesTheMissingOneAndCpuWorkStillRuns) {
  const std::string dprun = std::string("DPRUN_CUDA_PLUGIN=") + DPRUN_TEST_PLUGIN + " " +
                            DPRUN_BINARY + " " + source_path("models/mlp.onnx");
  const CommandResult gpu = run_shell(dprun + " --devices cuda:0");
  EXPECT_EQ(gpu.status, 1);
  EXPECT_EQ(gpu.output, std::string("dprun: error: device cuda:0: the CUDA backend ") +
                            DPRUN_TEST_PLUGIN + " cannot be loaded: libdprun_test_absent.so: " +
                            "cannot open shared object file: No such file or directory\n");
  const CommandResult cpu = run_shell(dprun + " --devices cpu:0 --batch 2");
  EXPECT_EQ(cpu.status, 0) << cpu.output;
}

// The code the plugin embeds, as (kind, sm) pairs: kind 1 PTX, 2 machine code (ELF). Read from
// its .nv_fatbin section (objcopy, from binutils): fat binary containers (magic 0xBA55ED50, a
// 16-byte header whose last 8 bytes are the entries' size), each a run of entries whose header
// gives the kind (u16 at 0), the header's size (u32 at 4), the payload's size (u64 at 8) and
// the architecture (u32 at 28).
std::set<std::pair<int, int>> embedded_code(const fs::path& library) {
  const fs::path section = scratch_path("plugin_fatbin");
  const CommandResult dumped = run_shell("objcopy --dump-section .nv_fatbin=" + section.string() +
                                         " " + library.string() + " /dev/null 2>&1");
  EXPECT_EQ(dumped.status, 0) << dumped.output;
  const std::string bytes = read_text(section);
  fs::remove(section);
  auto read = [&](size_t at, auto value) {
    if (at + sizeof value <= bytes.size()) std::memcpy(&value, bytes.data() + at, sizeof value);
    return value;
  };
  std::set<std::pair<int, int>> code;
  for (size_t at = 0; at + 16 <= bytes.size(); at += 8) {
    if (read(at, uint32_t{0}) != 0xBA55ED50u) continue;
    const size_t end = at + 16 + read(at + 8, uint64_t{0});
    for (size_t entry = at + 16; entry + 32 <= end && entry + 32 <= bytes.size();) {
      code.insert({read(entry, uint16_t{0}), static_cast<int>(read(entry + 28, uint32_t{0}))});
      entry += read(entry + 4, uint32_t{0}) + read(entry + 8, uint64_t{0});
    }
    at = (end + 7) / 8 * 8 - 8;
  }
  return code;
}

// The architectures CMAKE_CUDA_ARCHITECTURES asked for (by default 80-real,90: machine code for
// sm_80 and sm_90, PTX for sm_90) are what the plugin embeds, and nothing else.
TEST(CudaPlugin, ThePluginEmbedsTheConfiguredArchitectures) {
  const std::string configured_text = DPRUN_CUDA_ARCHITECTURES;
  if (configured_text.empty() || !std::isdigit(static_cast<unsigned char>(configured_text[0])))
    GTEST_SKIP() << "CMAKE_CUDA_ARCHITECTURES is " << configured_text << ", not a list of numbers";
  std::set<std::pair<int, int>> expected;
  std::stringstream configured(configured_text);
  for (std::string arch; std::getline(configured, arch, ',');) {
    const int sm = std::stoi(arch);
    if (!arch.ends_with("-virtual")) expected.insert({2, sm});
    if (!arch.ends_with("-real")) expected.insert({1, sm});
  }
  ASSERT_FALSE(expected.empty()) << DPRUN_CUDA_ARCHITECTURES;
  EXPECT_EQ(embedded_code(plugin_file()), expected);
}

TEST(CudaPlugin, Cuda0WithoutAGpuSaysSo) {
  if (driver_gpu_count() > 0) GTEST_SKIP() << "this machine has a GPU";
  const CommandResult r = run_dprun(source_path("models/mlp.onnx") + " --devices cuda:0");
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.output, "dprun: error: device cuda:0: no CUDA GPU is present\n");
}
#endif

}  // namespace
}  // namespace dprun::testing
