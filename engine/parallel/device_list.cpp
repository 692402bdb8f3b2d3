#include "engine/parallel/device_list.h"

#include <algorithm>
#include <cctype>

#include "engine/backend.h"
#include "engine/error.h"

namespace dprun {

namespace {
std::vector<Device> cpu_devices() {
  std::vector<Device> out;
  int count = backend_for(DeviceType::CPU).device_count();
  for (int i = 0; i < count; ++i) out.push_back(Device::cpu(i));
  return out;
}

bool all_digits(const std::string& s) {
  return !s.empty() &&
         std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c); });
}
}  // namespace

std::vector<Device> all_devices() {
  if (backend_available(DeviceType::CUDA)) {
    std::vector<Device> out;
    for (int i = 0; i < backend_for(DeviceType::CUDA).device_count(); ++i)
      out.push_back(Device::cuda(i));
    return out;
  }
  return cpu_devices();
}

std::vector<Device> parse_device_list(const std::string& text) {
  if (text == "all") return all_devices();
  if (text == "cpu") return cpu_devices();
  std::vector<Device> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    std::string item =
        text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    DPRUN_CHECK(!item.empty(), "invalid device list '", text, "': empty entry");
    Device d = all_digits(item) ? Device::parse("cuda:" + item) : Device::parse(item);
    DPRUN_CHECK(std::find(out.begin(), out.end(), d) == out.end(), "invalid device list '", text,
                "': ", d.to_string(), " appears twice");
    out.push_back(d);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  DPRUN_CHECK(!out.empty(), "empty device list");
  return out;
}

std::string device_list_to_string(const std::vector<Device>& devices) {
  std::string s;
  for (size_t i = 0; i < devices.size(); ++i) {
    if (i) s += ',';
    s += devices[i].to_string();
  }
  return s;
}

}  // namespace dprun
