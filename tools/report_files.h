#pragma once
// The files a command writes besides its model: the --json report, and the check that a path
// can be written before any work is done.
#include <string>

#include <nlohmann/json.hpp>

#include "engine/device.h"

namespace dprun {

/// A --json report: an object whose keys keep the order they were written in.
using JsonReport = nlohmann::ordered_json;

/// A device in a report: its name, as --devices spells it ("cpu:0", "cuda:1"); found by
/// nlohmann/json through argument-dependent lookup, so `report["devices"] = devices` works.
void to_json(JsonReport& out, const Device& device);

}  // namespace dprun

namespace dprun::cli {

/// Writes `report` to `path` as indented JSON, atomically (a reader sees the previous file or
/// this one, whole). Numbers keep every digit (a double reads back equal); a non-finite number
/// is written as null; bytes that are not UTF-8, as U+FFFD.
void write_json_report(const std::string& path, const JsonReport& report);

/// Fails (Error naming `--option` and `path`) unless `path` can be written before any work is
/// done: not a folder, in a folder that exists and is writable.
void check_writable(const std::string& path, const char* option);

}  // namespace dprun::cli
