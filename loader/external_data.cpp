#include "loader/external_data.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>
#include <system_error>

#include "engine/error.h"
#include "loader/tensor_walk.h"

namespace dprun {

namespace fs = std::filesystem;

namespace {

// The real path of `folder` ("" is the working folder), or nothing when it does not resolve.
std::optional<fs::path> real_folder(const std::string& folder) {
  std::error_code ec;
  fs::path real = fs::canonical(folder.empty() ? fs::path(".") : fs::path(folder), ec);
  if (ec) return std::nullopt;
  return real;
}

// Whether `path` is `folder` or lies inside it (both real paths).
bool lies_inside(const fs::path& path, const fs::path& folder) {
  const fs::path relative = path.lexically_relative(folder);
  return !relative.empty() && *relative.begin() != "..";
}

// The external_data entries ONNX defines; others (checksum, and keys of later versions) are
// not needed to read the bytes.
struct Reference {
  std::string location;
  std::optional<std::string> offset, length;
};

Reference reference_of(const onnx::TensorProto& proto) {
  Reference ref;
  for (const auto& entry : proto.external_data()) {
    if (entry.key() == "location") ref.location = entry.value();
    if (entry.key() == "offset") ref.offset = entry.value();
    if (entry.key() == "length") ref.length = entry.value();
  }
  return ref;
}

// A decimal count of bytes: digits only, no sign, no overflow.
size_t parse_count(const std::optional<std::string>& text, const char* key,
                   const std::string& tensor, size_t absent) {
  if (!text) return absent;
  size_t value = 0;
  bool valid = !text->empty() && text->size() <= 19;
  for (char c : *text) valid = valid && c >= '0' && c <= '9';
  if (valid)
    for (char c : *text) value = value * 10 + static_cast<size_t>(c - '0');
  DPRUN_CHECK(valid, "tensor '", tensor, "': external data ", key, " '", *text,
              "' is not a non-negative integer");
  return value;
}

// The lexical checks a location must pass before it is looked up on disk.
void check_location_text(const std::string& location, const std::string& tensor,
                         const ExternalDataFolders& folders) {
  DPRUN_CHECK(!location.empty(), "tensor '", tensor, "': external data has no location");
  DPRUN_CHECK(location.find('\0') == std::string::npos, "tensor '", tensor,
              "': external data location contains a NUL character");
  const fs::path path(location);
  DPRUN_CHECK(!path.has_root_path(), "tensor '", tensor, "': external data location '", location,
              "' is an absolute path; it must be relative to the model's folder");
  DPRUN_CHECK(!folders.base().empty() || !folders.roots().empty(), "tensor '", tensor,
              "': external data location '", location,
              "' cannot be read: the model was loaded from memory without a folder");
  DPRUN_CHECK(!folders.roots().empty(), "tensor '", tensor, "': external data location '", location,
              "' cannot be read: the model's folder '", folders.base(), "' cannot be resolved");
}

// The file's real path relative to the allowed folder that holds it, with that folder.
struct Resolved {
  fs::path root, relative;
};

Resolved resolve(const std::string& location, const std::string& tensor,
                 const ExternalDataFolders& folders, const std::string& display) {
  std::error_code ec;
  const fs::path base = folders.base().empty() ? fs::path(".") : fs::path(folders.base());
  const fs::path real = fs::canonical(base / location, ec);
  if (ec == std::errc::no_such_file_or_directory)
    fail("tensor '", tensor, "': external data file '", display, "' not found");
  if (ec)
    fail("tensor '", tensor, "': external data file '", display, "' cannot be opened (",
         ec.message(), ")");
  for (const fs::path& root : folders.roots())
    if (lies_inside(real, root)) return {root, real.lexically_relative(root)};
  const fs::path lexical = fs::path(location).lexically_normal();
  if (!lexical.empty() && *lexical.begin() == "..")
    fail("tensor '", tensor, "': external data location '", location,
         "' leads outside the model's folder");
  fail("tensor '", tensor, "': external data location '", location,
       "' leads outside the model's folder through a symbolic link");
}

}  // namespace

ExternalDataFolders ExternalDataFolders::of_model_file(const std::string& model_path) {
  ExternalDataFolders folders = of_folder(fs::path(model_path).parent_path().string());
  std::error_code ec;
  const fs::path real_model = fs::canonical(model_path, ec);
  if (!ec) {
    const fs::path real_parent = real_model.parent_path();
    if (folders.roots_.empty() || folders.roots_.front() != real_parent)
      folders.roots_.push_back(real_parent);
  }
  return folders;
}

ExternalDataFolders ExternalDataFolders::of_folder(const std::string& folder) {
  ExternalDataFolders folders;
  folders.base_ = folder;
  if (auto real = real_folder(folder)) folders.roots_.push_back(*real);
  return folders;
}

ExternalData::ExternalData(const onnx::TensorProto& proto, const ExternalDataFolders& folders,
                           size_t expected_bytes)
    : tensor_(proto.name()) {
  const Reference ref = reference_of(proto);
  check_location_text(ref.location, tensor_, folders);
  display_ = (fs::path(folders.base()) / ref.location).string();
  offset_ = parse_count(ref.offset, "offset", tensor_, 0);
  bytes_ = parse_count(ref.length, "length", tensor_, expected_bytes);
  DPRUN_CHECK(bytes_ == expected_bytes, "tensor '", tensor_, "': external data length ", bytes_,
              " does not match the ", expected_bytes, " bytes its shape needs");

  const Resolved resolved = resolve(ref.location, tensor_, folders, display_);
  file_ = open_beneath(resolved.root.string(), resolved.relative.string());
  if (!file_.valid() && (errno == ELOOP || errno == EXDEV))
    fail("tensor '", tensor_, "': external data location '", ref.location,
         "' changed while it was opened (a symbolic link appeared in its path)");
  DPRUN_CHECK(file_.valid(), "tensor '", tensor_, "': external data file '", display_,
              "' cannot be opened (", std::strerror(errno), ")");
  struct stat info {};
  DPRUN_CHECK(::fstat(file_.get(), &info) == 0 && S_ISREG(info.st_mode), "tensor '", tensor_,
              "': external data location '", ref.location, "' is not a regular file");
  const auto size = static_cast<size_t>(info.st_size);
  DPRUN_CHECK(offset_ <= size && size - offset_ >= bytes_, "tensor '", tensor_,
              "': external data file '", display_, "' is shorter than offset ", offset_, " + ",
              bytes_, " bytes");
}

void ExternalData::read_into(void* destination) const {
  auto* out = static_cast<char*>(destination);
  size_t done = 0;
  while (done < bytes_) {
    const ssize_t n =
        ::pread(file_.get(), out + done, bytes_ - done, static_cast<off_t>(offset_ + done));
    if (n < 0 && errno == EINTR) continue;
    DPRUN_CHECK(n > 0, "tensor '", tensor_, "': external data file '", display_,
                "' could not be read (", n < 0 ? std::strerror(errno) : "it was shortened", ")");
    done += static_cast<size_t>(n);
  }
}

namespace {

bool is_external(const onnx::TensorProto& tensor) {
  return tensor.data_location() == onnx::TensorProto::EXTERNAL;
}

}  // namespace

bool has_external_data(const onnx::GraphProto& graph) {
  bool found = false;
  for_each_tensor(graph,
                  [&](const onnx::TensorProto& tensor) { found = found || is_external(tensor); });
  return found;
}

// Only the reference is checked here; the tensor's shape is checked against it when the
// tensor is read, so a given length must only fit the file.
void check_external_data(const onnx::GraphProto& graph, const ExternalDataFolders& folders) {
  for_each_tensor(graph, [&](const onnx::TensorProto& tensor) {
    if (!is_external(tensor)) return;
    const std::optional<std::string> length = reference_of(tensor).length;
    ExternalData(tensor, folders, parse_count(length, "length", tensor.name(), 0));
  });
}

}  // namespace dprun
