#include "loader/checkpoint_file.h"

#include <filesystem>
#include <system_error>

#include "loader/onnx_loader.h"

namespace dprun {

std::string checkpoint_path(const std::string& save_path) {
  const std::string suffix = ".onnx";
  std::string stem = save_path;
  if (stem.size() > suffix.size() &&
      stem.compare(stem.size() - suffix.size(), suffix.size(), suffix) == 0)
    stem.resize(stem.size() - suffix.size());
  return stem + ".ckpt.onnx";
}

void save_checkpoint(const std::string& path, const CheckpointedRun& run, int64_t step,
                     const SaveOptions& options) {
  CheckpointContents contents;
  try {
    contents = checkpoint_contents(run, step);
  } catch (const Error& e) {
    fail(path, ": ", e.what());
  }
  save_graph(contents.graph, contents.parameters, path, options);  // its errors name the file
}

Checkpoint read_checkpoint(const std::string& path) {
  return checkpoint_from_graph(load_graph(path), path);  // load_graph's errors name the file
}

void remove_stale_temporaries(const std::string& path) {
  namespace fs = std::filesystem;
  const fs::path target(path);
  // Built by appends: GCC 12 reports a false -Wrestrict for "." + name + ".".
  std::string prefix(1, '.');
  prefix.append(target.filename().string()).append(".");
  const fs::path folder = target.parent_path().empty() ? fs::path(".") : target.parent_path();
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(folder, ec)) {
    const std::string name = entry.path().filename().string();
    // mkstemp's six characters after the prefix, and nothing else.
    if (name.size() == prefix.size() + 6 && name.rfind(prefix, 0) == 0 && entry.is_regular_file(ec))
      fs::remove(entry.path(), ec);
  }
}

}  // namespace dprun
