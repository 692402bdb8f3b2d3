#include "tools/outputs.h"

#include <cstdio>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "loader/npy.h"

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

std::string preview_values(const Tensor& tensor, int64_t count) {
  Tensor host = tensor.to(Device::cpu());
  std::string out = "[";
  const int64_t n = std::min(count, host.numel());
  for (int64_t i = 0; i < n; ++i) {
    if (i) out += ", ";
    if (host.dtype() == DType::String) {
      out += nlohmann::json(host.data<std::string>()[i])
                 .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
      continue;
    }
    char number[32];
    std::snprintf(number, sizeof(number), "%.6g", host.item_as_double(i));
    out += number;
  }
  if (host.numel() > n) out += ", ...";
  return out + "]";
}

std::string safe_file_name(const std::string& name) {
  std::string out = name;
  for (char& c : out) {
    bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-';
    if (!ok) c = '_';
  }
  if (out.empty() || out == "." || out == "..") out = "_" + out;
  return out;
}

}  // namespace dprun::cli
