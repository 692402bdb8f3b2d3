#pragma once
// Parsing of device lists as given on the command line or by applications.
#include <string>
#include <vector>

#include "engine/device.h"

namespace dprun {

/// Parses "all" (every CUDA GPU if any, else one CPU device per core), "cpu" (one CPU device
/// per core), "cpu:N" or "cpu:N,cpu:M", "cuda:N,...", and bare "0,1,2" (CUDA ids). Throws
/// Error on an empty list, a duplicate or an unknown device.
std::vector<Device> parse_device_list(const std::string& text);
/// The devices "all" stands for.
std::vector<Device> all_devices();
/// "cpu:0,cpu:1"
std::string device_list_to_string(const std::vector<Device>& devices);

}  // namespace dprun
