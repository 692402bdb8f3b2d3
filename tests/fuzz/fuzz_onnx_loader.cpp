// Fuzz target: bytes as an ONNX model file. Whatever the bytes, loading them and compiling the
// model for the CPU either succeeds or throws dprun::Error (the one-line message the CLI
// prints); anything else (a crash, a sanitizer report, another exception) is a defect.
#include <cstddef>
#include <cstdint>

#include "engine/error.h"
#include "engine/model.h"
#include "loader/onnx_loader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    auto graph = dprun::load_graph_from_buffer(data, size);
    dprun::Model model(graph, dprun::Device::cpu());
  } catch (const dprun::Error&) {
  }
  return 0;
}
