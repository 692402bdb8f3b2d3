#include "tools/format.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace dprun::cli {

std::string preview_values(const Tensor& tensor, int64_t count) {
  Tensor host = tensor.to(Device::cpu());
  std::ostringstream out;
  out << '[';
  int64_t n = std::min(count, host.numel());
  for (int64_t i = 0; i < n; ++i) {
    if (host.dtype() == DType::String) {
      out << (i ? ", " : "") << json_string(host.data<std::string>()[i]);
      continue;
    }
    double v = host.item_as_double(i);
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.6g", v);
    out << (i ? ", " : "") << buf;
  }
  if (host.numel() > n) out << ", ...";
  out << ']';
  return out.str();
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

std::string json_string(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

void check_writable(const std::string& path, const char* option) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    fail("--", option, " ", path, ": is a folder; give the file to write");
  auto dir = std::filesystem::path(path).parent_path();
  if (dir.empty()) dir = ".";
  if (!std::filesystem::is_directory(dir, ec) || access(dir.c_str(), W_OK) != 0)
    fail("--", option, " ", path, ": the folder ", dir.string(),
         " does not exist or is not writable");
}

}  // namespace dprun::cli
