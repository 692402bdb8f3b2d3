// Fuzz target: bytes as an ONNX model file. Whatever the bytes, loading them and compiling the
// model for the CPU either succeeds or throws dprun::Error (the one-line message the CLI
// prints; the loader throws nothing else); anything else (a crash, a sanitizer report, another
// exception) is a defect.
//
// The bytes are loaded as a file in a folder laid out for external data, so that the path
// checks (loader/external_data.h) are fuzzed with the rest: beside the model are w.bin (64
// bytes of 0x3f), weights/w.bin, link.bin (a link to a file outside the folder), inside.bin (a
// link to w.bin) and up (a link to the folder above); outside the folder is secret.bin, 64
// bytes of 0x5a. A model that loads must never hold those bytes: a tensor that does fails the
// run, as a crash would.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <system_error>

#include "engine/error.h"
#include "engine/model.h"
#include "loader/onnx_loader.h"

namespace {

namespace fs = std::filesystem;

constexpr char kSecretByte = 0x5a;

void write_file(const fs::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// The folder the model is written to, laid out once per process and removed at its exit.
struct ModelFolder {
  fs::path root = fs::temp_directory_path() / ("dprun_fuzz_models_" + std::to_string(getpid()));
  fs::path model = root / "model";

  ModelFolder() {
    fs::remove_all(root);
    fs::create_directories(model / "weights");
    write_file(root / "secret.bin", std::string(64, kSecretByte));
    write_file(model / "w.bin", std::string(64, 0x3f));
    write_file(model / "weights" / "w.bin", std::string(64, 0x3f));
    fs::create_symlink(root / "secret.bin", model / "link.bin");
    fs::create_symlink("w.bin", model / "inside.bin");
    fs::create_symlink(root, model / "up");
  }
  ~ModelFolder() {
    std::error_code ignored;
    fs::remove_all(root, ignored);
  }
};

const fs::path& model_folder() {
  static const ModelFolder folder;
  return folder.model;
}

// The secret file's bytes, 8 of them: as many as the smallest float tensor of the corpus.
const std::string kSecretRun(8, kSecretByte);

// Whether a tensor of `graph` holds a run of the secret file's bytes.
bool holds_secret(const dprun::Graph& graph) {
  for (const auto& [name, tensor] : graph.initializers) {
    if (tensor.dtype() == dprun::DType::String) continue;
    const std::string_view bytes(static_cast<const char*>(tensor.raw_data()), tensor.nbytes());
    if (bytes.find(kSecretRun) != std::string_view::npos) return true;
  }
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const fs::path path = model_folder() / "m.onnx";
  write_file(path, std::string(reinterpret_cast<const char*>(data), size));
  try {
    auto graph = dprun::load_graph(path.string());
    // Unless the model's own bytes hold the run (inline data may), it came from the file.
    const std::string_view input(reinterpret_cast<const char*>(data), size);
    if (holds_secret(*graph) && input.find(kSecretRun) == std::string_view::npos) {
      std::fprintf(stderr, "a model read the file outside its folder\n");
      std::abort();
    }
    dprun::Model model(graph, dprun::Device::cpu());
  } catch (const dprun::Error&) {
  }
  return 0;
}
