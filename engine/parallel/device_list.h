#pragma once
// Parsing of device lists as given on the command line or by applications.
#include <string>
#include <vector>

#include "engine/device.h"

namespace dprun {

/// Parses "all" (see all_devices()), "cpu" (one CPU device per core), "cpu:N" or
/// "cpu:N,cpu:M", "cuda:N,...", and bare "0,1,2" (CUDA ids). Throws Error on an empty list, a
/// duplicate or a malformed device. Parsing does not check that a device can be used: CUDA
/// devices parse in every build, and the backend rejects them where they cannot be used
/// (backend_for: a build without CUDA; Backend::check_device: no such GPU).
std::vector<Device> parse_device_list(const std::string& text);
/// The devices "all" stands for: every CUDA GPU when the CUDA backend has at least one, else one
/// CPU device per core.
std::vector<Device> all_devices();
/// "cpu:0,cpu:1"
std::string device_list_to_string(const std::vector<Device>& devices);

}  // namespace dprun
