#pragma once
// Parsing of device lists as given on the command line or by applications.
#include <string>
#include <vector>

#include "engine/device.h"

namespace dprun {

/// Parses "all" (see all_devices()), "cpu" (one CPU device per core), "cpu:N" or
/// "cpu:N,cpu:M", "cuda:N,...", and bare "0,1,2" (CUDA ids). Throws Error on an empty list, a
/// duplicate or a malformed device. Parsing does not check that a device can be used: CUDA
/// devices parse in every build, and backend_for() rejects them where there is no CUDA
/// backend (there is none yet).
std::vector<Device> parse_device_list(const std::string& text);
/// The devices "all" stands for: one CPU device per core. A registered CUDA backend with at
/// least one GPU would take precedence, but no build has one yet.
std::vector<Device> all_devices();
/// "cpu:0,cpu:1"
std::string device_list_to_string(const std::vector<Device>& devices);

}  // namespace dprun
