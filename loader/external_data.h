#pragma once
// Reading a tensor's external data (TensorProto.data_location == EXTERNAL) from files beside
// the model, and only there: a model must not be able to read its user's other files.
#include <onnx/onnx_pb.h>

#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

#include "loader/open_beneath.h"

namespace dprun {

/// The folders a model's external data may come from. A file qualifies when its real path
/// (every symbolic link resolved) lies inside one of them:
///  - the model's folder;
///  - the folder of the model file's own real path, where it differs: a model hub's cache
///    links `model.onnx` and `model.onnx_data` from a snapshot folder into a blobs folder.
/// Without any folder (a model loaded from bytes), every external data location is refused.
class ExternalDataFolders {
 public:
  /// No folder: external data is refused.
  ExternalDataFolders() = default;
  /// The folders of the model file at `model_path`.
  static ExternalDataFolders of_model_file(const std::string& model_path);
  /// `folder` alone (a model loaded from bytes with a base folder; a tensor file's folder).
  static ExternalDataFolders of_folder(const std::string& folder);

  /// The folder locations are relative to, as the user gave it ("" when none).
  const std::string& base() const { return base_; }
  /// The real paths of the folders a file may lie in.
  const std::vector<std::filesystem::path>& roots() const { return roots_; }

 private:
  std::string base_;
  std::vector<std::filesystem::path> roots_;
};

/// A tensor's external data file, opened and checked: a regular file inside the allowed
/// folders that holds `bytes` bytes from `offset`.
class ExternalData {
 public:
  /// Resolves and opens `proto`'s external data. Throws Error naming the tensor and the
  /// location when the location is missing, absolute, leads outside the folders (by `..` or a
  /// symbolic link), is not a regular file or cannot be opened; when offset or length is not
  /// a non-negative integer; when length differs from `expected_bytes` (what the tensor's
  /// shape needs) or the file is shorter than offset + length.
  ExternalData(const onnx::TensorProto& proto, const ExternalDataFolders& folders,
               size_t expected_bytes);

  /// Reads the tensor's bytes into `destination` (expected_bytes of room).
  void read_into(void* destination) const;

 private:
  std::string tensor_;   // the tensor's name, for messages
  std::string display_;  // the file as the user would find it, for messages
  FileDescriptor file_;
  size_t offset_ = 0;
  size_t bytes_ = 0;
};

/// Whether a tensor of `graph` or of its subgraphs has external data.
bool has_external_data(const onnx::GraphProto& graph);

/// Opens and checks every external data reference of `graph` (initializers, tensors in node
/// attributes, and those of subgraphs, recursively) without reading them, so a hostile or
/// broken model is refused before anything else looks at its files.
void check_external_data(const onnx::GraphProto& graph, const ExternalDataFolders& folders);

}  // namespace dprun
