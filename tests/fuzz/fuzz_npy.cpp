// Fuzz target: bytes as a .npy file (the --input and --target files of run, bench and train).
// Parsing either gives a tensor whose size matches its shape or throws dprun::Error; anything
// else (a crash, a sanitizer report, another exception) is a defect.
#include <cstddef>
#include <cstdint>
#include <string>

#include "engine/error.h"
#include "loader/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const dprun::Tensor t =
        dprun::parse_npy(std::string(reinterpret_cast<const char*>(data), size), "fuzz.npy");
    // Read every element: a tensor shorter than its shape says would be read past its end.
    if (t.dtype() != dprun::DType::String)
      for (int64_t i = 0; i < t.numel(); ++i) (void)t.item_as_double(i);
  } catch (const dprun::Error&) {
  }
  return 0;
}
