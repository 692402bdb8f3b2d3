#pragma once
// dprun.Model, dprun.load and dprun.load_bytes: an ONNX model read into dprun's graph, with its
// inputs and outputs by name, dtype and shape. Compiling happens where the devices are known
// (dprun.DataParallel, dprun.Trainer), as `dprun run` compiles on its first device.
#include <pybind11/pybind11.h>

#include <memory>
#include <string>

#include "engine/graph.h"

namespace dprun::python {

/// A model as Python holds it. close() lets go of the graph; using the model after it throws
/// Error "the model SOURCE is closed".
class PythonModel {
 public:
  PythonModel(std::shared_ptr<const Graph> graph, std::string source);
  /// The graph; throws when the model is closed.
  std::shared_ptr<const Graph> graph() const;
  /// Where the model came from: its path, or "<bytes>".
  const std::string& source() const { return source_; }
  void close() { graph_.reset(); }
  bool closed() const { return graph_ == nullptr; }

 private:
  std::shared_ptr<const Graph> graph_;
  std::string source_;
};

/// `value` as a path: a str, or an os.PathLike. Throws Error naming `what` otherwise.
std::string path_of(const pybind11::handle& value, const std::string& what);

/// Registers Model, ValueInfo, load and load_bytes.
void register_model(pybind11::module_& m);

}  // namespace dprun::python
