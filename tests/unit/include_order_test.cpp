// The rooms of the tree and their order (docs/architecture.md, "Layering"): a file includes
// headers of its own room and of the rooms below it, never of one above. The order is read
// from the document itself, so the document and the check cannot drift apart.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace dprun {
namespace {

namespace fs = std::filesystem;

fs::path source_root() {
  const char* root = std::getenv("DPRUN_SOURCE_DIR");
  return root ? root : DPRUN_SOURCE_DIR_DEFAULT;
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

/// The rooms, lowest first: the first code span of each numbered item after the "rooms"
/// marker of docs/architecture.md, up to the first line that is neither an item nor its
/// continuation.
std::vector<std::string> rooms_in_order(const std::string& document) {
  std::vector<std::string> rooms;
  std::istringstream lines(document.substr(document.find("<!-- rooms, lowest first")));
  std::string line;
  std::getline(lines, line);  // the marker
  const std::regex item(R"(^\d+\. `([^`]+)`)");
  while (std::getline(lines, line) && (line.starts_with("   ") || std::isdigit(line[0]))) {
    std::smatch match;
    if (std::regex_search(line, match, item)) rooms.push_back(match[1]);
  }
  return rooms;
}

/// The index in `rooms` of the room of `path` (relative to the source root): the longest room
/// that is a prefix of it; -1 for none.
int room_of(const std::string& path, const std::vector<std::string>& rooms) {
  int best = -1;
  for (size_t i = 0; i < rooms.size(); ++i)
    if (path.starts_with(rooms[i]) &&
        (best < 0 || rooms[i].size() > rooms[static_cast<size_t>(best)].size()))
      best = static_cast<int>(i);
  return best;
}

struct SourceFile {
  std::string path;  // relative to the source root
  std::string text;
};

/// "FILE includes HEADER: ROOM is above ROOM" for every include of a project header from a
/// lower room. Forwarding headers left by a move (first line "// Deprecated forwarding
/// header") may include upward.
std::vector<std::string> upward_includes(const std::vector<SourceFile>& files,
                                         const std::vector<std::string>& rooms) {
  std::vector<std::string> found;
  const std::regex include(R"re(^\s*#\s*include\s+"([^"]+)")re");
  for (const SourceFile& file : files) {
    if (file.text.starts_with("// Deprecated forwarding header")) continue;
    const int from = room_of(file.path, rooms);
    std::istringstream lines(file.text);
    for (std::string line; std::getline(lines, line);) {
      std::smatch match;
      if (!std::regex_search(line, match, include)) continue;
      const int to = room_of(match[1], rooms);
      if (from >= 0 && to > from)
        found.push_back(file.path + " includes " + std::string(match[1]) + ": " +
                        rooms[static_cast<size_t>(to)] + " is above " +
                        rooms[static_cast<size_t>(from)]);
    }
  }
  return found;
}

/// The device whose code `path` (under ops/) is: "cuda" for CUDA compute (.cu, .cuh, *_cuda.cpp,
/// *_cuda.h and ops/cuda/ but its defs/), "cpu" for CPU code (ops/cpu/ and the families'
/// kernels), "" for device-neutral code (ops/common/, ops/math/, ops/grad/, *_util.h, CUDA
/// definitions, the simulated devices). Gradient rules are told by their text (below).
std::string device_of(const std::string& path) {
  const fs::path p(path);
  const std::string stem = p.stem().string(), ext = p.extension().string();
  if (path.starts_with("ops/cuda/defs/") || stem.ends_with("_cuda_def")) return "";
  if (ext == ".cu" || ext == ".cuh" || stem.ends_with("_cuda") || path.starts_with("ops/cuda/"))
    return "cuda";
  if (path.starts_with("ops/cpu/")) return "cpu";
  for (const char* neutral : {"ops/common/", "ops/math/", "ops/grad/", "ops/sim/"})
    if (path.starts_with(neutral)) return "";
  if (stem.ends_with("_util")) return "";
  return "cpu";
}

/// "FILE includes HEADER" for every include of a device's header (ops/cpu/, ops/cuda/ but its
/// defs/, or a family's CUDA header) by code of another device or by device-neutral code: what
/// several devices use lives in ops/common/ or beside the family's ops.
std::vector<std::string> device_header_includes(const std::vector<SourceFile>& files) {
  std::vector<std::string> found;
  const std::regex include(R"re(^\s*#\s*include\s+"(ops/[^"]+)")re");
  for (const SourceFile& file : files) {
    if (!file.path.starts_with("ops/")) continue;
    // A gradient rule emits ONNX nodes for every device.
    const bool rule = file.text.find("DPRUN_REGISTER_GRADIENT(") != std::string::npos;
    const std::string device = rule ? "" : device_of(file.path);
    std::istringstream lines(file.text);
    for (std::string line; std::getline(lines, line);) {
      std::smatch match;
      if (!std::regex_search(line, match, include)) continue;
      const std::string header = match[1];
      const std::string header_device = device_of(header);
      const bool device_header = header.starts_with("ops/cpu/") || header_device == "cuda";
      if (device_header && header_device != device)
        found.push_back(file.path + " includes " + header);
    }
  }
  return found;
}

std::vector<SourceFile> project_sources() {
  std::vector<SourceFile> files;
  const fs::path root = source_root();
  for (const char* top : {"engine", "ops", "loader", "tools"})
    for (const auto& entry : fs::recursive_directory_iterator(root / top)) {
      const std::string ext = entry.path().extension().string();
      if (ext == ".h" || ext == ".cpp" || ext == ".cu" || ext == ".cuh")
        files.push_back({fs::relative(entry.path(), root).string(), read_file(entry.path())});
    }
  return files;
}

const std::vector<std::string>& documented_rooms() {
  static const std::vector<std::string> rooms =
      rooms_in_order(read_file(source_root() / "docs" / "architecture.md"));
  return rooms;
}

TEST(IncludeOrder, TheDocumentListsTheRoomsLowestFirst) {
  EXPECT_EQ(documented_rooms(),
            (std::vector<std::string>{"engine/", "engine/rewrites/", "engine/distributed/",
                                      "engine/backends/", "engine/model", "engine/autograd/",
                                      "engine/parallel/", "engine/training/", "ops/", "loader/",
                                      "tools/"}));
}

TEST(IncludeOrder, NoIncludeRunsUpward) {
  const std::vector<SourceFile> files = project_sources();
  ASSERT_GT(files.size(), 500u);
  const std::vector<std::string> found = upward_includes(files, documented_rooms());
  std::string listed;
  for (const std::string& line : found) listed += "\n  " + line;
  EXPECT_TRUE(found.empty()) << found.size() << " includes run upward:" << listed;
}

TEST(IncludeOrder, OnlyADevicesCodeIncludesItsHeaders) {
  const std::vector<std::string> found = device_header_includes(project_sources());
  std::string listed;
  for (const std::string& line : found) listed += "\n  " + line;
  EXPECT_TRUE(found.empty()) << found.size() << " includes of another device's header:" << listed;
  const std::string cpu_header = "#include \"ops/cpu/onednn_util.h\"\n";
  const std::string cuda_header = "#include \"ops/conv/conv_descriptors_cuda.h\"\n";
  EXPECT_EQ(device_header_includes(
                {{"ops/conv/conv.cu", cpu_header},
                 {"ops/conv/conv_grad.cpp", cpu_header + "DPRUN_REGISTER_GRADIENT({});\n"},
                 {"ops/conv/conv_weight_grad.cpp", cpu_header},
                 {"ops/conv/conv_cuda_def.cpp", cuda_header},
                 {"ops/conv/conv.cpp", cuda_header},
                 {"ops/conv/conv_onednn.cpp", cpu_header},
                 {"ops/conv/conv_cuda.cpp", cuda_header},
                 {"ops/cuda/strided_copy.cu", cuda_header},
                 {"ops/conv/conv_cuda_def.cpp", "#include \"ops/cuda/defs/node_checks.h\"\n"}}),
            (std::vector<std::string>{
                "ops/conv/conv.cu includes ops/cpu/onednn_util.h",
                "ops/conv/conv_grad.cpp includes ops/cpu/onednn_util.h",
                "ops/conv/conv_cuda_def.cpp includes ops/conv/conv_descriptors_cuda.h",
                "ops/conv/conv.cpp includes ops/conv/conv_descriptors_cuda.h"}));
}

TEST(IncludeOrder, AnUpwardIncludeIsFoundAndAForwardingHeaderIsNot) {
  const std::vector<SourceFile> files = {
      {"engine/autograd/x.cpp", "#include \"engine/graph.h\"\n#include \"engine/training/y.h\"\n"},
      {"engine/model.cpp", "#include \"engine/rewrites/z.h\"\n"},
      {"engine/plan.cpp", "  #  include \"engine/model.h\"\n"},
      {"engine/parallel/old.h",
       "// Deprecated forwarding header: moved.\n#include \"engine/training/new.h\"\n"},
  };
  EXPECT_EQ(upward_includes(files, documented_rooms()),
            (std::vector<std::string>{
                "engine/autograd/x.cpp includes engine/training/y.h: engine/training/ is above "
                "engine/autograd/",
                "engine/plan.cpp includes engine/model.h: engine/model is above engine/"}));
}

}  // namespace
}  // namespace dprun
