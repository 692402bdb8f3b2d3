#include "tools/outputs.h"

#include <cstdio>
#include <filesystem>

#include "loader/npy.h"
#include "tools/format.h"

namespace dprun::cli {

void report_outputs(const std::vector<std::string>& names, const std::vector<Tensor>& outputs,
                    const std::string& output_dir) {
  if (!output_dir.empty()) std::filesystem::create_directories(output_dir);
  for (size_t i = 0; i < outputs.size(); ++i) {
    std::printf("  output %-24s %s %s\n", names[i].c_str(), outputs[i].describe().c_str(),
                preview_values(outputs[i]).c_str());
    if (!output_dir.empty())
      write_npy(outputs[i],
                (std::filesystem::path(output_dir) / (safe_file_name(names[i]) + ".npy")).string());
  }
}

}  // namespace dprun::cli
