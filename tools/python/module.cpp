// The Python module `dprun` (docs/python.md): load, Model, DataParallel, Trainer and Error.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "engine/parallel/device_list.h"
#include "tools/python/arrays.h"
#include "tools/python/data_parallel.h"
#include "tools/python/errors.h"
#include "tools/python/model.h"
#include "tools/python/pending_step.h"
#include "tools/python/trainer.h"

namespace py = pybind11;

PYBIND11_MODULE(dprun, m) {
  m.doc() =
      "dprun: data-parallel ONNX execution and training. load() a model, run it with "
      "DataParallel, train it with Trainer; every error is a dprun.Error.";
  m.attr("__version__") = DPRUN_VERSION;
  dprun::python::register_errors(m);
  dprun::python::register_model(m);
  dprun::python::register_data_parallel(m);
  dprun::python::register_pending_step(m);
  dprun::python::register_trainer(m);
  m.def(
      "all_devices",
      [] {
        std::vector<std::string> names;
        for (const dprun::Device& d : dprun::all_devices()) names.push_back(d.to_string());
        return names;
      },
      "The devices device_ids=None or \"all\" stands for.");
  // For the tests: the address of the memory the engine reads for `array` as an input of
  // `dtype` (a NumPy dtype name), to check that an input is read in place.
  m.def(
      "_input_address",
      [](const py::object& array, const std::string& dtype) {
        dprun::TensorType type{.dtype = dprun::dtype_from_name(dtype)};
        const dprun::Tensor t = dprun::python::tensor_from_python(array, "x", type);
        return reinterpret_cast<uintptr_t>(t.raw_data());
      },
      py::arg("array"), py::arg("dtype"));
}
