#include "tools/python/model.h"

#include <pybind11/stl.h>

#include <sstream>

#include "loader/onnx_loader.h"
#include "tools/python/errors.h"

namespace py = pybind11;

namespace dprun::python {

PythonModel::PythonModel(std::shared_ptr<const Graph> graph, std::string source)
    : graph_(std::move(graph)), source_(std::move(source)) {}

std::shared_ptr<const Graph> PythonModel::graph() const {
  if (!graph_) raise("the model " + source_ + " is closed");
  return graph_;
}

std::string path_of(const py::handle& value, const std::string& what) {
  if (py::isinstance<py::str>(value)) return value.cast<std::string>();
  if (py::hasattr(value, "__fspath__")) {
    py::object path = py::module_::import("os").attr("fspath")(value);
    if (py::isinstance<py::str>(path)) return path.cast<std::string>();
  }
  raise(what + " must be a path (str or os.PathLike), got " +
        std::string(py::str(py::type::handle_of(value).attr("__name__"))));
}

namespace {

// A value's name, dtype and shape as Python sees them: the dtype as NumPy names it (None when
// the model does not say), each dim an int, its symbol's name, or None (unknown); the shape None
// when the rank is unknown.
struct ValueDescription {
  std::string name;
  py::object dtype;
  py::object shape;
};

ValueDescription describe(const ValueInfo& info) {
  ValueDescription d{.name = info.name, .dtype = py::none(), .shape = py::none()};
  if (info.type.dtype != DType::Undefined)
    d.dtype = py::str(std::string(dtype_name(info.type.dtype)));
  if (info.type.shape) {
    py::list dims;
    for (const Dim& dim : *info.type.shape) {
      if (dim.is_known())
        dims.append(dim.value);
      else if (!dim.symbol.empty())
        dims.append(dim.symbol);
      else
        dims.append(py::none());
    }
    d.shape = py::tuple(dims);
  }
  return d;
}

std::vector<ValueDescription> inputs_of(const PythonModel& model) {
  std::vector<ValueDescription> out;
  for (const ValueInfo* in : model.graph()->required_inputs()) out.push_back(describe(*in));
  return out;
}

std::vector<ValueDescription> outputs_of(const PythonModel& model) {
  std::vector<ValueDescription> out;
  for (const ValueInfo& o : model.graph()->outputs) out.push_back(describe(o));
  return out;
}

std::string repr_of(const ValueDescription& d) {
  return "ValueInfo(name='" + d.name + "', dtype=" + std::string(py::repr(d.dtype)) +
         ", shape=" + std::string(py::repr(d.shape)) + ")";
}

}  // namespace

void register_model(py::module_& m) {
  py::class_<ValueDescription>(m, "ValueInfo",
                               "An input or output of a model: name, dtype (a NumPy dtype name "
                               "such as 'float32', or None) and shape (a tuple of ints, symbolic "
                               "dim names and None for unknown dims; None when the rank is "
                               "unknown).")
      .def_readonly("name", &ValueDescription::name)
      .def_readonly("dtype", &ValueDescription::dtype)
      .def_readonly("shape", &ValueDescription::shape)
      .def("__repr__", &repr_of);

  py::class_<PythonModel, std::shared_ptr<PythonModel>>(
      m, "Model",
      "An ONNX model loaded by dprun.load or dprun.load_bytes. Compiled for devices by "
      "dprun.DataParallel and dprun.Trainer.")
      .def_property_readonly("input_names",
                             [](const PythonModel& model) {
                               std::vector<std::string> names;
                               for (const auto& d : inputs_of(model)) names.push_back(d.name);
                               return names;
                             })
      .def_property_readonly("output_names",
                             [](const PythonModel& model) {
                               std::vector<std::string> names;
                               for (const auto& d : outputs_of(model)) names.push_back(d.name);
                               return names;
                             })
      .def_property_readonly("inputs", &inputs_of, "The inputs a caller feeds, in order.")
      .def_property_readonly("outputs", &outputs_of, "The outputs, in order.")
      .def_property_readonly("path", &PythonModel::source)
      .def_property_readonly("closed", &PythonModel::closed)
      .def("close", &PythonModel::close, "Lets go of the model's graph and parameters.")
      .def("__enter__", [](std::shared_ptr<PythonModel> self) { return self; })
      .def("__exit__", [](PythonModel& self, py::args) { self.close(); })
      .def("__repr__", [](const PythonModel& model) {
        std::ostringstream text;
        text << "<dprun.Model " << model.source();
        if (model.closed()) {
          text << " (closed)>";
          return text.str();
        }
        text << ": inputs";
        for (const auto& d : inputs_of(model)) text << ' ' << repr_of(d);
        text << '>';
        return text.str();
      });

  m.def(
      "load",
      [](const py::object& path) {
        const std::string file = path_of(path, "load: path");
        std::shared_ptr<Graph> graph;
        {
          py::gil_scoped_release release;
          graph = load_graph(file);
        }
        return std::make_shared<PythonModel>(std::move(graph), file);
      },
      py::arg("path"),
      "Reads an ONNX model file (external data from its folder). Raises dprun.Error naming the "
      "file when it cannot be read or is no valid model.");
  m.def(
      "load_bytes",
      [](const py::object& data, const py::object& base_dir) {
        std::string dir;
        if (!base_dir.is_none()) dir = path_of(base_dir, "load_bytes: base_dir");
        py::buffer_info info;
        try {
          info = py::reinterpret_borrow<py::buffer>(data).request();
        } catch (const py::error_already_set&) {
          raise("load_bytes: data must be bytes (or any object with the buffer protocol), got " +
                std::string(py::str(py::type::handle_of(data).attr("__name__"))));
        }
        const size_t size = static_cast<size_t>(info.size * info.itemsize);
        std::shared_ptr<Graph> graph;
        {
          py::gil_scoped_release release;
          graph = load_graph_from_buffer(info.ptr, size, dir);
        }
        return std::make_shared<PythonModel>(std::move(graph), "<bytes>");
      },
      py::arg("data"), py::arg("base_dir") = py::none(),
      "Reads an ONNX model from memory (a serialized ModelProto); external data, if any, from "
      "base_dir.");
}

}  // namespace dprun::python
